// CUDA backward rasterizer, the scalar kernel (3DGS/gsplat style; the plan's kScalar and
// kScalarDet backward; f16/bf16 forwards take the Tensor Core backward of rasterize_mma_bwd.cu,
// gsrender/raster_plan.h): one block per tile, one
// thread per pixel, the tile's list walked back to front from the block's largest last_ids in
// shared-memory batches. The gradient recurrences are CompositorGrad's (gsrender/composite.h),
// the CPU backward's too, with v_w_k = g·f_k and v_colors_k += w_k·g, then AlphaGrad
// (gsrender/alpha.h) to the 2D parameters. The transmittance before each Gaussian is recovered
// by division, T_k = T_{k+1} / (1 − α_k) starting from T_final (CompositorGrad::recover, 3DGS's
// choice: one pass, no forward replay; composite.h says why the CPU replays instead). Per-Gaussian sums are reduced over each warp (__shfl_down_sync) and added
// with one atomicAdd per warp; a warp skips a Gaussian none of its pixels uses.
// deterministic=true (kScalarDet, gsrender/det_reduce.h) runs this kernel for every precision
// (the exact fp32 backward; the Tensor Core one is not used) with the block's sums written to one part row per
// tile-list entry, in a fixed order (warp shuffle tree, then the warps in order), and a second
// kernel sums each Gaussian's rows in entry order: no float atomics, bitwise-reproducible.
#include <algorithm>
#include <cub/cub.cuh>

#include "gsrender/composite.h"
#include "gsrender/det_pass.h"
#include "gsrender/launch/rasterize.h"
#include "raster_common.cuh"

namespace gsrender {
namespace gpu {
namespace {

constexpr int kWarps = kMaxThreads / 32;

// deterministic=true: this pass's part rows ([M, ps.stride]) and the per-tile v_backgrounds rows
// ([tiles, CH], nullptr without backgrounds).
template <typename T>
struct DetRows {
  T* part;
  T* bg_part;
  DetPass ps;
};

// Block sums of consecutive fields of one row in a fixed order: each warp's shuffle tree, then
// the warps' totals in warp order. Every thread of the block calls put() for every field, so the
// 32-field staging area in shared memory is flushed (two barriers) at block-uniform points.
template <typename T>
struct BlockRow {
  T (*red)[32];  // shared [kWarps][32]
  T* row;
  int q = 0;

  __device__ __forceinline__ void put(T v) {
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5][q] = v;
    if (++q == 32) flush();
  }
  __device__ __forceinline__ void flush() {
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < q) {
      T sum = T(0);
      const int nw = static_cast<int>(blockDim.x) >> 5;
      for (int w = 0; w < nw; ++w) sum += red[w][threadIdx.x];
      row[threadIdx.x] = sum;
    }
    __syncthreads();  // red is free again
    row += q;
    q = 0;
  }
};

template <typename T, bool kDet>
__global__ void __launch_bounds__(kMaxThreads, 1)
    rasterize_bwd_kernel(const RasterArgs<T> p, const RasterBwdIO<T> io, const DetRows<T> det) {
  __shared__ Stage<T> s;
  __shared__ int32_t s_stop;
  __shared__ T red[kDet ? kWarps : 1][32];
  const TileRun run = tile_run(p, blockIdx.x);
  const ThreadPixel px = thread_pixel(p, run);
  const T pcx = px.x + T(0.5), pcy = px.y + T(0.5);
  const int64_t CH = p.CH;
  const T* bg = p.backgrounds ? p.backgrounds + run.cam * CH : nullptr;

  // Per-pixel state (gsrender/composite.h, CompositorGrad; all zero outside the image).
  // g = grad.scale·v_render is the gradient of the normalised output.
  int32_t last = run.start;
  CompositorGrad<T> grad{p.sorted};
  const T* vr = nullptr;
  if (px.inside) {
    last = io.last_ids[px.pix];
    vr = io.v_render + px.pix * CH;
    grad.start(io.aux[px.pix], io.alphas[px.pix], io.v_alphas[px.pix]);
    const T* out = p.sorted ? nullptr : io.render + px.pix * CH;
    if (out || bg)  // sorted without a background: the seed's channel terms are 0
      for (int64_t c = 0; c < CH; ++c)
        grad.channel(vr[c], bg ? bg[c] : T(0), out ? out[c] : T(0));
    grad.seal();
  }

  if (bg) {  // v_backgrounds: sorted T_final·v_render, weighted w_bg·g
    if constexpr (kDet) {
      if (det.ps.first) {
        BlockRow<T> r{red, det.bg_part + int64_t(blockIdx.x) * CH};
        for (int64_t c = 0; c < CH; ++c) r.put(px.inside ? grad.v_bg(vr[c], p.w_bg) : T(0));
        r.flush();
      }
    } else {
      T* vbg = io.v_backgrounds + run.cam * CH;
      for (int64_t c = 0; c < CH; ++c)
        warp_add(vbg + c, px.inside ? grad.v_bg(vr[c], p.w_bg) : T(0));
    }
  }

  // The walk ends at the block's largest last_ids (sorted mode's early stop; the tile end in
  // weighted mode, where last_ids is the tile end).
  if (threadIdx.x == 0) s_stop = run.start;
  __syncthreads();
  if (px.inside) atomicMax(&s_stop, last);
  __syncthreads();
  const int32_t stop = s_stop;
  const int nthreads = static_cast<int>(blockDim.x);

  for (int32_t b1 = stop; b1 > run.start; b1 -= nthreads) {
    const int32_t b0 = max(run.start, b1 - nthreads);
    const int n = b1 - b0;
    __syncthreads();  // the previous batch is fully read
    if (static_cast<int>(threadIdx.x) < n)
      stage_gaussian(s, threadIdx.x, p, p.flatten_ids[b0 + static_cast<int32_t>(threadIdx.x)]);
    __syncthreads();
    for (int j = n - 1; j >= 0; --j) {
      const T dx = s.mx[j] - pcx, dy = s.my[j] - pcy;
      const T alpha = px.inside && b0 + j < last
                          ? pair_alpha<T>(s.opacity[j], gaussian_sigma<T>(s.a[j], s.b[j],
                                                                          s.c[j], dx, dy))
                          : T(0);
      const bool valid = alpha != T(0);
      if constexpr (kDet) {
        if (!__syncthreads_or(valid)) continue;  // block-uniform: the row stays 0
      } else {
        if (!__any_sync(0xffffffffu, valid)) continue;  // warp-uniform
      }
      const int64_t id = s.id[j];
      T w = T(0), t_before = T(0);
      if (valid) {
        if (p.sorted) t_before = grad.recover(alpha);  // T divided out back to front
        w = alpha * (p.sorted ? t_before : s.phi[j]);
      }
      // One pass over the channels: v_W = g·f, and the warp's share of v_colors += w·g.
      const T* f = p.colors + id * CH;
      T* vc = io.v_colors + id * CH;
      T v_w = T(0);
      for (int64_t c = 0; c < CH; ++c) {
        const T gc = px.inside ? vr[c] * grad.scale : T(0);
        v_w += gc * f[c];
        if constexpr (!kDet) warp_add(vc + c, w * gc);
      }
      AlphaGrad<T> ag;
      T v_depth = T(0);
      if (valid) {
        T net = T(0);  // weighted only
        const T v_al = grad.step(alpha, t_before, w, v_w, s.phi[j], &net);
        if (!p.sorted)
          v_depth = net * alpha * depth_weight_dz<T>(p.depths[id], s.phi[j], p.sigma_w, p.beta);
        ag.add(v_al, alpha, s.opacity[j], s.a[j], s.b[j], s.c[j], dx, dy);
      }
      if constexpr (kDet) {  // fields in DetField order, then the pass's channels
        BlockRow<T> r{red, det.part + int64_t(b0 + j) * det.ps.stride};
        r.put(ag.v_mean_x), r.put(ag.v_mean_y);
        r.put(ag.v_a), r.put(ag.v_b), r.put(ag.v_c);
        r.put(ag.v_opacity), r.put(v_depth);
        for (int64_t c = det.ps.c0; c < det.ps.c0 + det.ps.nc; ++c)
          r.put(px.inside ? w * (vr[c] * grad.scale) : T(0));  // w·g as the default path
        r.flush();
      } else {
        warp_add(io.v_means2d + 2 * id, ag.v_mean_x);
        warp_add(io.v_means2d + 2 * id + 1, ag.v_mean_y);
        warp_add(io.v_conics + 3 * id, ag.v_a);
        warp_add(io.v_conics + 3 * id + 1, ag.v_b);
        warp_add(io.v_conics + 3 * id + 2, ag.v_c);
        warp_add(io.v_opacities + id, ag.v_opacity);
        if (!p.sorted) warp_add(io.v_depths + id, v_depth);
      }
    }
  }
}

// One thread per (Gaussian, field) of a pass: its entries summed in entry order.
template <typename T>
__global__ void det_reduce_kernel(const DetOut<T> out, const DetPass ps, const T* __restrict__ part,
                                  const int64_t* __restrict__ order,
                                  const int64_t* __restrict__ seg, int64_t G) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= G * ps.stride) return;
  det_reduce_one(out, ps, part, order, seg, idx / ps.stride, idx % ps.stride);
}

// One thread per (camera, channel): v_backgrounds as the camera's tile rows summed in tile order.
template <typename T>
__global__ void det_bg_kernel(const T* __restrict__ bg_part, T* __restrict__ v_backgrounds,
                              int64_t C, int64_t tiles_per_cam, int64_t CH) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= C * CH) return;
  const int64_t cam = idx / CH, c = idx % CH;
  v_backgrounds[idx] =
      det_column_sum<T>(bg_part, CH, nullptr, cam * tiles_per_cam, (cam + 1) * tiles_per_cam, c);
}

inline unsigned det_blocks(int64_t work) { return static_cast<unsigned>((work + 255) / 256); }

__global__ void iota64_kernel(int64_t M, int64_t* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < M) out[i] = i;
}

// seg[g] = first k with sorted[k] >= g, g in [0, G] (searchsorted, left).
__global__ void segments_kernel(int64_t M, int64_t G, const int32_t* __restrict__ sorted,
                                int64_t* __restrict__ seg) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g > G) return;
  int64_t lo = 0, hi = M;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (sorted[mid] < g) lo = mid + 1; else hi = mid;
  }
  seg[g] = lo;
}

// The deterministic backward's workspace: the plan (flatten_ids sorted stably, its entry order
// and each Gaussian's segment), one pass's part rows, the per-tile v_backgrounds rows and cub's
// sort storage.
template <typename T>
struct DetLayout {
  int32_t* sorted_ids;
  int64_t *iota, *order, *seg;
  T *part, *bg_part;
  void* cub_tmp;
  size_t cub_bytes = 0;
  int64_t chunk, G, n_tiles;
  int key_bits;
  size_t total;
  DetLayout(const RasterArgs<T>& p, void* base) {
    G = p.C * p.N, n_tiles = launch::raster_tiles(p);
    chunk = det_chunk(p.M, p.CH, sizeof(T));
    key_bits = 1;  // flatten_ids lie in [0, G)
    while ((int64_t(1) << key_bits) < G) ++key_bits;
    cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, static_cast<const int32_t*>(nullptr),
                                    static_cast<int32_t*>(nullptr),
                                    static_cast<const int64_t*>(nullptr),
                                    static_cast<int64_t*>(nullptr), p.M, 0, key_bits);
    launch::Carver c(base);
    sorted_ids = c.take<int32_t>(p.M);
    iota = c.take<int64_t>(p.M), order = c.take<int64_t>(p.M), seg = c.take<int64_t>(G + 1);
    part = c.take<T>(p.M * (kDetFields + std::min<int64_t>(chunk, std::max<int64_t>(p.CH, 1))));
    bg_part = c.take<T>(p.backgrounds ? n_tiles * p.CH : 0);
    cub_tmp = c.take<char>(static_cast<int64_t>(cub_bytes));
    total = c.used();
  }
};

// deterministic=true: the plan, then per chunk of channels the tile pass into part and its
// reduction (cost and memory in gsrender/det_reduce.h).
template <typename T>
cudaError_t backward_deterministic(const RasterArgs<T>& p, const RasterBwdIO<T>& io,
                                   const DetLayout<T>& l, cudaStream_t stream) {
  const int64_t CH = p.CH, G = l.G, M = p.M;
  const bool has_bg = p.backgrounds != nullptr;
  if (M > 0) {
    GSR_LAUNCH(det_blocks(M), 256, 0, stream, iota64_kernel)(M, l.iota);
    GSR_CUDA_TRY(cudaGetLastError());
    size_t bytes = l.cub_bytes;
    GSR_CUDA_TRY(cub::DeviceRadixSort::SortPairs(l.cub_tmp, bytes, p.flatten_ids, l.sorted_ids,
                                                 l.iota, l.order, M, 0, l.key_bits, stream));
  }
  GSR_LAUNCH(det_blocks(G + 1), 256, 0, stream, segments_kernel)(M, G, l.sorted_ids, l.seg);
  GSR_CUDA_TRY(cudaGetLastError());
  if (has_bg)
    GSR_CUDA_TRY(cudaMemsetAsync(l.bg_part, 0, sizeof(T) * l.n_tiles * CH, stream));
  const DetOut<T> out{io.v_means2d, io.v_conics, io.v_opacities, io.v_colors, io.v_depths, CH};
  const int threads = launch::raster_threads(p.tile_size);
  for (int64_t c0 = 0; c0 < std::max<int64_t>(CH, 1); c0 += l.chunk) {
    const DetPass ps = det_pass(l.chunk, c0, CH);
    GSR_CUDA_TRY(cudaMemsetAsync(l.part, 0, sizeof(T) * M * ps.stride, stream));
    const DetRows<T> det{l.part, has_bg ? l.bg_part : nullptr, ps};
    GSR_LAUNCH(static_cast<unsigned>(l.n_tiles), threads, 0, stream, rasterize_bwd_kernel<T, true>)(
        p, io, det);
    GSR_CUDA_TRY(cudaGetLastError());
    if (G * ps.stride == 0) continue;
    GSR_LAUNCH(det_blocks(G * ps.stride), 256, 0, stream, det_reduce_kernel<T>)(out, ps, l.part, l.order,
                                                                         l.seg, G);
    GSR_CUDA_TRY(cudaGetLastError());
  }
  if (!has_bg || p.C * CH == 0) return cudaSuccess;
  GSR_LAUNCH(det_blocks(p.C * CH), 256, 0, stream, det_bg_kernel<T>)(l.bg_part, io.v_backgrounds, p.C,
                                                             int64_t(p.TH) * p.TW, CH);
  return cudaGetLastError();
}

}  // namespace
}  // namespace gpu

namespace launch {

template <typename T>
cudaError_t launch_rasterize_bwd(const RasterBwdArgs<T>& a, cudaStream_t stream) {
  const int64_t n_tiles = raster_tiles(a.in);
  if (n_tiles == 0) return cudaSuccess;
  GSR_LAUNCH(static_cast<unsigned>(n_tiles),
                                        raster_threads(a.in.tile_size), 0, stream, gpu::rasterize_bwd_kernel<T, false>)(
      a.in, a.io, gpu::DetRows<T>{});
  return cudaGetLastError();
}

template <typename T>
size_t rasterize_bwd_det_workspace_bytes(const RasterBwdArgs<T>& a) {
  return gpu::DetLayout<T>(a.in, nullptr).total;
}

template <typename T>
cudaError_t launch_rasterize_bwd_det(const RasterBwdArgs<T>& a, Workspace ws,
                                     cudaStream_t stream) {
  const gpu::DetLayout<T> l(a.in, ws.ptr);
  if (ws.bytes < l.total) return cudaErrorInvalidValue;
  if (l.n_tiles == 0) return cudaSuccess;
  return gpu::backward_deterministic<T>(a.in, a.io, l, stream);
}

#define GSR_INSTANTIATE(T)                                                                   \
  template cudaError_t launch_rasterize_bwd<T>(const RasterBwdArgs<T>&, cudaStream_t);       \
  template size_t rasterize_bwd_det_workspace_bytes<T>(const RasterBwdArgs<T>&);             \
  template cudaError_t launch_rasterize_bwd_det<T>(const RasterBwdArgs<T>&, Workspace,       \
                                                   cudaStream_t);
GSR_INSTANTIATE(float)
GSR_INSTANTIATE(double)
#undef GSR_INSTANTIATE

}  // namespace launch
}  // namespace gsrender
