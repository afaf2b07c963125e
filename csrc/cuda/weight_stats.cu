// CUDA weight_stats (SplitGS-Loc, DESIGN §7): one block per tile, one thread per pixel, the
// tile's list staged through shared memory as in the scalar rasterizer; w = α·T with the sorted
// renderer's α, cut, clamp and early stop (gsrender/alpha.h). Per contributing pair: Σw by
// atomicAdd, max w by an integer atomicMax on the bit pattern (w ≥ 0 orders like its bits), the
// view-dominance flag by a plain store into [C, N] flags (every writer stores 1), and the pixel's
// own top-K list (gsrender/weight_stats.h) in its output rows. Σw's float atomics make its last
// bits depend on the order; everything else is exact.
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>

#include "gsrender/weight_stats.h"
#include "raster_common.cuh"

namespace gsrender {
namespace gpu {
namespace {

using at::Tensor;

template <typename T>
struct StatsOut {
  T* wsum;          // [N]
  T* wmax;          // [N]
  int32_t* dom;     // [C, N]: 1 where the Gaussian has w > tau_s at some pixel of view c
  int32_t* topk_ids;  // [C, H, W, K]
  T* topk_w;          // [C, H, W, K]
  int64_t K;
  T tau_s;
};

__device__ __forceinline__ void atomic_max_nonneg(float* dst, float v) {
  atomicMax(reinterpret_cast<int*>(dst), __float_as_int(v));
}
__device__ __forceinline__ void atomic_max_nonneg(double* dst, double v) {
  atomicMax(reinterpret_cast<long long*>(dst), __double_as_longlong(v));
}

template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    weight_stats_kernel(const RasterArgs<T> p, const StatsOut<T> o) {
  __shared__ Stage<T> s;
  const TileRun run = tile_run(p, blockIdx.x);
  const ThreadPixel px = thread_pixel(p, run);
  const T pcx = px.x + T(0.5), pcy = px.y + T(0.5);
  const int nthreads = static_cast<int>(blockDim.x);
  T* kw = o.topk_w + px.pix * o.K;
  int32_t* kid = o.topk_ids + px.pix * o.K;
  T tr = T(1);
  bool done = !px.inside;
  for (int32_t b0 = run.start; b0 < run.end; b0 += nthreads) {
    const int n = stage_next_batch(s, p, run, b0, done);
    if (n == 0) break;
    for (int j = 0; j < n && !done; ++j) {
      const T alpha = pair_alpha<T>(
          s.opacity[j], gaussian_sigma<T>(s.a[j], s.b[j], s.c[j], s.mx[j] - pcx, s.my[j] - pcy));
      if (alpha == T(0)) continue;
      const T next = tr * (T(1) - alpha);
      if (next < T(kTransmittanceMin)) {
        done = true;
        break;
      }
      const T w = alpha * tr;
      tr = next;
      const int64_t gid = s.id[j] - run.cam * p.N;
      atomicAdd(o.wsum + gid, w);
      atomic_max_nonneg(o.wmax + gid, w);
      if (w > o.tau_s) o.dom[s.id[j]] = 1;  // s.id = c·N + n indexes [C, N]
      topk_insert(w, static_cast<int32_t>(gid), o.K, kw, kid);
    }
  }
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> weight_stats_cuda(
    const Tensor& means2d, const Tensor& conics, const Tensor& opacities, const Tensor& depths,
    const Tensor& tile_offsets, const Tensor& flatten_ids, int64_t width, int64_t height,
    int64_t tile_size, double tau_s, int64_t top_k) {
  const RasterInputs in = check_weight_stats_inputs(means2d, conics, opacities, depths,
                                                    tile_offsets, flatten_ids, width, height,
                                                    tile_size, tau_s, top_k);
  check_cuda_tile_size(tile_size);
  const c10::cuda::CUDAGuard guard(means2d.device());
  validate_binning_cuda(in, nullptr, width, height, tile_size);
  const int64_t C = means2d.size(0), N = means2d.size(1);
  const auto opts = means2d.options();
  Tensor wsum = at::zeros({N}, opts), wmax = at::zeros({N}, opts);
  Tensor dom = at::zeros({C, N}, opts.dtype(at::kInt));
  Tensor topk_ids = at::full({C, height, width, top_k}, -1, opts.dtype(at::kInt));
  Tensor topk_w = at::zeros({C, height, width, top_k}, opts);
  const int64_t n_tiles = in.tile_offsets.numel();
  if (n_tiles > 0) {
    TORCH_CHECK_VALUE(n_tiles < INT32_MAX, "weight_stats: ", n_tiles, " tiles exceed the grid");
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "weight_stats_cuda", [&] {
      using T = scalar_t;
      const RasterArgs<T> p = make_raster_args<T>(in, width, height, tile_size, 0, {});
      const StatsOut<T> o{wsum.data_ptr<T>(),         wmax.data_ptr<T>(),
                          dom.data_ptr<int32_t>(),    topk_ids.data_ptr<int32_t>(),
                          topk_w.data_ptr<T>(),       top_k,
                          static_cast<T>(tau_s)};
      weight_stats_kernel<T><<<static_cast<unsigned>(n_tiles), raster_threads(tile_size), 0,
                               stream>>>(p, o);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }
  return {wsum, wmax, dom.sum(0, false, at::kInt), topk_ids, topk_w};
}

}  // namespace
}  // namespace gpu

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) { m.impl("weight_stats", &gpu::weight_stats_cuda); }

}  // namespace gsrender
