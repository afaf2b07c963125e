// CUDA forward rasterizer, the scalar kernel in the style of 3DGS/gsplat: one block per tile, one
// thread per pixel, the tile's list staged through shared memory in batches of blockDim
// Gaussians, α from gsrender::pair_alpha and 3DGS's early stop exactly as the CPU
// (csrc/cpu/rasterize_fwd.cpp), sorted and weighted modes, backgrounds, any number of channels.
//
// It runs impl = scalar, and the matrix impls where the Tensor Core kernel does not apply
// (float64, tile sizes other than 16, GPUs older than sm_80): see rasterize_mma.cuh.
//
// Channels: a thread accumulates kChunk channels in registers; blockIdx.y picks the channel
// chunk, so CH > kChunk runs ceil(CH / kChunk) blocks per tile that each walk the tile's list
// (recomputing α: the same code on the same inputs, so every chunk sees the same weights). Two
// chunk widths are compiled: 4 (RGB + depth, the common case) and 32.
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>

#include "raster_common.cuh"
#include "rasterize_mma.cuh"

namespace gsrender {
namespace gpu {
namespace {

using at::Tensor;

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
  T tr = T(1);    // sorted: transmittance; weighted: Π(1 − α)
  T wsum = T(0);  // weighted: Σ α·φ
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
      if (p.sorted) {
        const T next = tr * (T(1) - alpha);
        if (next < T(kTransmittanceMin)) {  // 3DGS's early stop: this Gaussian is excluded
          done = true;
          break;
        }
        w = alpha * tr;
        tr = next;
        last = b0 + j + 1;
      } else {
        w = alpha * s.phi[j];
        wsum += w;
        tr *= T(1) - alpha;
      }
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
    const T denom = wsum + p.w_bg;
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      if (c0 + c >= p.CH) break;
      const T b = bg ? bg[c0 + c] : T(0);
      dst[c0 + c] = p.sorted ? acc[c] + tr * b : (acc[c] + p.w_bg * b) / denom;
    }
    if (blockIdx.y == 0) {
      o.alphas[px.pix] = T(1) - tr;
      o.last_ids[px.pix] = p.sorted ? last : run.end;
      o.aux[px.pix] = p.sorted ? tr : denom;
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
void launch_fwd(const RasterArgs<T>& p, const FwdOut<T>& o, int64_t n_tiles, int threads,
                cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>((p.CH + kChunk - 1) / kChunk));
  rasterize_fwd_kernel<T, kChunk><<<grid, threads, 0, stream>>>(p, o);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> rasterize_fwd_cuda(
    const Tensor& means2d, const Tensor& conics, const Tensor& opacities, const Tensor& colors,
    const Tensor& depths, const c10::optional<Tensor>& backgrounds, const Tensor& tile_offsets,
    const Tensor& flatten_ids, int64_t width, int64_t height, int64_t tile_size, int64_t mode,
    at::ArrayRef<double> weight_params, int64_t impl, bool /*deterministic: backward only*/) {
  const RasterInputs in =
      check_raster_inputs(means2d, conics, opacities, colors, depths, backgrounds, tile_offsets,
                          flatten_ids, width, height, tile_size, mode, weight_params);
  check_raster_impl(impl);
  check_cuda_tile_size(tile_size);
  const c10::cuda::CUDAGuard guard(means2d.device());
  validate_binning_cuda(in, nullptr, width, height, tile_size);
  const int64_t C = means2d.size(0), CH = colors.size(2);
  const auto [render, alphas, last_ids, aux, stats] =
      empty_raster_outputs(C, height, width, CH, means2d.options());
  const int64_t n_tiles = in.tile_offsets.numel();
  if (n_tiles == 0) return {render, alphas, last_ids, aux, stats};
  TORCH_CHECK_VALUE(n_tiles < INT32_MAX, "rasterize_fwd: ", n_tiles, " tiles exceed the grid");
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int threads = raster_threads(tile_size);
  if (mma_rasterizer_applies(means2d, tile_size, impl)) {
    const FwdOut<float> o{render.data_ptr<float>(), alphas.data_ptr<float>(),
                          last_ids.data_ptr<int32_t>(), aux.data_ptr<float>(),
                          stats.data_ptr<int64_t>()};
    launch_rasterize_mma_fwd(make_raster_args<float>(in, width, height, tile_size, mode,
                                                     weight_params),
                             o, in.colors, impl, n_tiles, stream);
    return {render, alphas, last_ids, aux, stats};
  }
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "rasterize_fwd_cuda", [&] {
    using T = scalar_t;
    const RasterArgs<T> p = make_raster_args<T>(in, width, height, tile_size, mode,
                                                     weight_params);
    const FwdOut<T> o{render.data_ptr<T>(), alphas.data_ptr<T>(), last_ids.data_ptr<int32_t>(),
                      aux.data_ptr<T>(), stats.data_ptr<int64_t>()};
    if (CH <= 4)
      launch_fwd<T, 4>(p, o, n_tiles, threads, stream);
    else
      launch_fwd<T, 32>(p, o, n_tiles, threads, stream);
  });
  return {render, alphas, last_ids, aux, stats};
}

}  // namespace
}  // namespace gpu

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) { m.impl("rasterize_fwd", &gpu::rasterize_fwd_cuda); }

}  // namespace gsrender
