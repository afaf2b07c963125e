// CUDA weight_stats (SplitGS-Loc, docs/design.md §7): one block per tile, one thread per pixel, the
// tile's list staged through shared memory as in the scalar rasterizer; w = α·T with the sorted
// renderer's α, cut, clamp and early stop (gsrender/alpha.h). Per contributing pair: Σw by
// atomicAdd, max w by an integer atomicMax on the bit pattern (w ≥ 0 orders like its bits), the
// view-dominance flag by a plain store into [C, N] flags (every writer stores 1), and the pixel's
// own top-K list (gsrender/weight_stats.h) in its output rows. Σw's float atomics make its last
// bits depend on the order; everything else is exact.
#include "gsrender/composite.h"
#include "gsrender/launch/weight_stats.h"
#include "gsrender/topk.h"
#include "raster_common.cuh"

namespace gsrender {
namespace gpu {
namespace {

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
  Compositor<T> comp{true};
  bool done = !px.inside;
  for (int32_t b0 = run.start; b0 < run.end; b0 += nthreads) {
    const int n = stage_next_batch(s, p, run, b0, done);
    if (n == 0) break;
    for (int j = 0; j < n && !done; ++j) {
      const T alpha = pair_alpha<T>(
          s.opacity[j], gaussian_sigma<T>(s.a[j], s.b[j], s.c[j], s.mx[j] - pcx, s.my[j] - pcy));
      if (alpha == T(0)) continue;
      T w;
      if (!comp.take(alpha, T(0), &w)) {
        done = true;
        break;
      }
      const int64_t gid = s.id[j] - run.cam * p.N;
      atomicAdd(o.wsum + gid, w);
      atomic_max_nonneg(o.wmax + gid, w);
      if (w > o.tau_s) o.dom[s.id[j]] = 1;  // s.id = c·N + n indexes [C, N]
      topk_insert(w, static_cast<int32_t>(gid), o.K, kw, kid);
    }
  }
}

// n_views[n] = Σ_c dom[c, n] (one thread per Gaussian, cameras in order).
__global__ void count_views_kernel(int64_t C, int64_t N, const int32_t* __restrict__ dom,
                                   int32_t* __restrict__ n_views) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  int32_t v = 0;
  for (int64_t c = 0; c < C; ++c) v += dom[c * N + n];
  n_views[n] = v;
}

}  // namespace
}  // namespace gpu

namespace launch {

template <typename T>
size_t weight_stats_workspace_bytes(const WeightStatsArgs<T>& a) {
  Carver c(nullptr);
  c.take<int32_t>(a.in.C * a.in.N);
  return c.used();
}

template <typename T>
cudaError_t launch_weight_stats(const WeightStatsArgs<T>& a, Workspace ws, cudaStream_t stream) {
  const int64_t n_tiles = raster_tiles(a.in), CN = a.in.C * a.in.N;
  if (ws.bytes < weight_stats_workspace_bytes(a)) return cudaErrorInvalidValue;
  int32_t* dom = Carver(ws.ptr).take<int32_t>(CN);  // [C, N]
  GSR_CUDA_TRY(cudaMemsetAsync(dom, 0, sizeof(int32_t) * CN, stream));
  if (n_tiles > 0) {
    GSR_LAUNCH(static_cast<unsigned>(n_tiles),
                                  raster_threads(a.in.tile_size), 0, stream, gpu::weight_stats_kernel<T>)(
        a.in, gpu::StatsOut<T>{a.wsum, a.wmax, dom, a.topk_ids, a.topk_w, a.K, a.tau_s});
    GSR_CUDA_TRY(cudaGetLastError());
  }
  if (a.in.N == 0) return cudaSuccess;
  GSR_LAUNCH(static_cast<unsigned>((a.in.N + 255) / 256), 256, 0, stream, gpu::count_views_kernel)(
      a.in.C, a.in.N, dom, a.n_views);
  return cudaGetLastError();
}

#define GSR_INSTANTIATE(T)                                                             \
  template size_t weight_stats_workspace_bytes<T>(const WeightStatsArgs<T>&);         \
  template cudaError_t launch_weight_stats<T>(const WeightStatsArgs<T>&, Workspace,   \
                                              cudaStream_t);
GSR_INSTANTIATE(float)
GSR_INSTANTIATE(double)
#undef GSR_INSTANTIATE

}  // namespace launch
}  // namespace gsrender
