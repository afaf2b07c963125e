// CUDA forward rasterizer, the scalar kernel in the style of 3DGS/gsplat: one block per tile, one
// thread per pixel, the tile's list staged through shared memory in batches of blockDim
// Gaussians, α from gsrender::pair_alpha and 3DGS's early stop exactly as the CPU
// (csrc/cpu/rasterize_fwd_kernel.cpp), sorted and weighted modes, backgrounds, any number of
// channels.
//
// It is the plan's kScalar forward: precision fp32, and every precision where the Tensor Cores
// do not run (float64, tile sizes other than 16, GPUs older than sm_80): see
// gsrender/raster_plan.h.
//
// Channels: a thread accumulates kChunk channels in registers; blockIdx.y picks the channel
// chunk, so CH > kChunk runs ceil(CH / kChunk) blocks per tile that each walk the tile's list
// (recomputing α: the same code on the same inputs, so every chunk sees the same weights). Two
// chunk widths are compiled: 4 (RGB + depth, the common case) and 32.
#include "gsrender/composite.h"
#include "gsrender/launch/rasterize.h"
#include "raster_common.cuh"

namespace gsrender {
namespace gpu {
namespace {

template <typename T, int kChunk>
__global__ void __launch_bounds__(kMaxThreads)
    rasterize_fwd_kernel(const RasterArgs<T> p, const FwdOut<T> o) {
  __shared__ Stage<T> s;
  const TileRun run = tile_run(p, blockIdx.x);
  const ThreadPixel px = thread_pixel(p, run);
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kChunk;  // first channel of the chunk
  const T pcx = px.x + T(0.5), pcy = px.y + T(0.5);              // pixel centre
  const int nthreads = static_cast<int>(blockDim.x);

  T acc[kChunk];
#pragma unroll
  for (int c = 0; c < kChunk; ++c) acc[c] = T(0);
  Compositor<T> comp{p.sorted};
  int32_t last = run.start;
  bool done = !px.inside;
  unsigned long long evaluated = 0, useful = 0;
  int32_t walked = run.start;  // list entries staged (the same in every thread)

  for (int32_t b0 = run.start; b0 < run.end; b0 += nthreads) {
    const int n = stage_next_batch(s, p, run, b0, done);
    if (n == 0) break;  // every pixel of the tile has saturated
    walked = b0 + n;
    for (int j = 0; j < n && !done; ++j) {
      ++evaluated;
      const T alpha = pair_alpha<T>(
          s.opacity[j], gaussian_sigma<T>(s.a[j], s.b[j], s.c[j], s.mx[j] - pcx, s.my[j] - pcy));
      if (alpha == T(0)) continue;
      T w;
      if (!comp.take(alpha, s.phi[j], &w)) {  // 3DGS's early stop: this Gaussian is excluded
        done = true;
        break;
      }
      if (p.sorted) last = b0 + j + 1;
      ++useful;
      const T* f = p.colors + static_cast<int64_t>(s.id[j]) * p.CH + c0;
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        if (c0 + c >= p.CH) break;
        acc[c] += w * f[c];
      }
    }
  }

  if (px.inside) {
    const T* bg = p.backgrounds ? p.backgrounds + run.cam * p.CH : nullptr;
    T* dst = o.render + px.pix * p.CH;
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      if (c0 + c >= p.CH) break;
      dst[c0 + c] = comp.resolve(acc[c], bg ? bg[c0 + c] : T(0), p.w_bg);
    }
    if (blockIdx.y == 0) {
      o.alphas[px.pix] = T(1) - comp.trans;
      o.last_ids[px.pix] = p.sorted ? last : run.end;
      o.aux[px.pix] = comp.aux(p.w_bg);
    }
  }
  if (blockIdx.y == 0) {  // statistics once per tile (chunk 0)
    int64_t* st = o.stats + 3 * run.cam;
    evaluated = warp_sum(evaluated);
    useful = warp_sum(useful);
    if ((threadIdx.x & 31) == 0) {
      atomicAdd(reinterpret_cast<unsigned long long*>(st + 1), evaluated);
      atomicAdd(reinterpret_cast<unsigned long long*>(st + 2), useful);
    }
    if (threadIdx.x == 0)
      atomicAdd(reinterpret_cast<unsigned long long*>(st),
                static_cast<unsigned long long>((walked - run.start) * tile_pixels(p, run)));
  }
}

template <typename T, int kChunk>
cudaError_t launch_fwd(const RasterArgs<T>& p, const FwdOut<T>& o, int64_t n_tiles, int threads,
                       cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>((p.CH + kChunk - 1) / kChunk));
  GSR_LAUNCH(grid, threads, 0, stream, rasterize_fwd_kernel<T, kChunk>)(p, o);
  return cudaGetLastError();
}

}  // namespace
}  // namespace gpu

namespace launch {

template <typename T>
cudaError_t launch_rasterize_fwd(const RasterFwdArgs<T>& a, cudaStream_t stream) {
  const int64_t n_tiles = raster_tiles(a.in);
  if (n_tiles == 0) return cudaSuccess;
  const int threads = raster_threads(a.in.tile_size);
  return a.in.CH <= 4 ? gpu::launch_fwd<T, 4>(a.in, a.out, n_tiles, threads, stream)
                      : gpu::launch_fwd<T, 32>(a.in, a.out, n_tiles, threads, stream);
}

template cudaError_t launch_rasterize_fwd<float>(const RasterFwdArgs<float>&, cudaStream_t);
template cudaError_t launch_rasterize_fwd<double>(const RasterFwdArgs<double>&, cudaStream_t);

}  // namespace launch
}  // namespace gsrender
