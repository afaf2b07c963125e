// Device-side pieces shared by the CUDA rasterize kernels (forward and backward): the kernel
// arguments, the tile/pixel a block/thread owns, shared-memory staging of a batch of Gaussians,
// warp sums; torch-free. The math (α, σ, φ, the support box) comes from the headers the CPU
// backend uses, so both run one formula.
#pragma once
#include <cstdint>

#include "gsrender/alpha.h"
#include "gsrender/common.h"
#include "gsrender/launch/rasterize.h"
#include "gsrender/raster_args.h"
#include "gsrender/tiles.h"

namespace gsrender {
namespace gpu {

using launch::kMaxThreads;

// The tile of block blockIdx.x (tiles of all cameras in [C, TH, TW] order) and its list run.
struct TileRun {
  int64_t cam;
  int tx, ty;
  int32_t start, end;  // [start, end) in flatten_ids
};

template <typename T>
__device__ __forceinline__ TileRun tile_run(const RasterArgs<T>& p, int64_t tile) {
  const int64_t per_cam = int64_t(p.TH) * p.TW;
  TileRun r;
  r.cam = tile / per_cam;
  r.ty = static_cast<int>((tile % per_cam) / p.TW);
  r.tx = static_cast<int>(tile % p.TW);
  r.start = p.tile_offsets[tile];
  r.end = tile + 1 < p.C * per_cam ? p.tile_offsets[tile + 1] : static_cast<int32_t>(p.M);
  return r;
}

// The pixel of thread threadIdx.x inside its tile (row-major); threads past the tile or the
// image are inactive but still take part in staging and warp reductions.
struct ThreadPixel {
  int x, y;
  bool inside;
  int64_t pix;  // index into [C, H, W]
};

template <typename T>
__device__ __forceinline__ ThreadPixel thread_pixel(const RasterArgs<T>& p, const TileRun& r) {
  ThreadPixel q;
  const int local = static_cast<int>(threadIdx.x);
  q.x = r.tx * p.tile_size + local % p.tile_size;
  q.y = r.ty * p.tile_size + local / p.tile_size;
  q.inside = local < p.tile_size * p.tile_size && q.x < p.width && q.y < p.height;
  q.pix = q.inside ? (r.cam * p.height + q.y) * p.width + q.x : 0;
  return q;
}

// Pixels of tile r inside the image (the "listed pairs" statistic counts list entries × these).
template <typename T>
__device__ __forceinline__ int64_t tile_pixels(const RasterArgs<T>& p, const TileRun& r) {
  const int x0 = r.tx * p.tile_size, y0 = r.ty * p.tile_size;
  const int x1 = min(x0 + p.tile_size, p.width), y1 = min(y0 + p.tile_size, p.height);
  return int64_t(x1 - x0) * (y1 - y0);
}

// A batch of up to kMaxThreads Gaussians of a tile's list, staged in shared memory (structure of
// arrays: every thread reads entry j at once, a broadcast).
template <typename T>
struct Stage {
  T mx[kMaxThreads], my[kMaxThreads], a[kMaxThreads], b[kMaxThreads], c[kMaxThreads];
  T opacity[kMaxThreads], phi[kMaxThreads];  // phi: weighted mode's φ(z); 1 when sorted
  int32_t id[kMaxThreads];                    // flat index c*N + n
};

template <typename T>
__device__ __forceinline__ void stage_gaussian(Stage<T>& s, int k, const RasterArgs<T>& p,
                                               int32_t id) {
  s.id[k] = id;
  s.mx[k] = p.means2d[2 * int64_t(id)];
  s.my[k] = p.means2d[2 * int64_t(id) + 1];
  s.a[k] = p.conics[3 * int64_t(id)];
  s.b[k] = p.conics[3 * int64_t(id) + 1];
  s.c[k] = p.conics[3 * int64_t(id) + 2];
  s.opacity[k] = p.opacities[id];
  s.phi[k] = p.sorted ? T(1) : depth_weight<T>(p.depths[id], p.sigma_w, p.beta);
}

// Stages the next batch of the tile's list, entries [b0, b0 + blockDim.x) (one per thread), and
// returns its size; returns 0 (nothing staged) once every pixel of the block is done. The
// __syncthreads_count doubles as the barrier that keeps the batch from overwriting entries
// another thread still reads. Every thread must call it.
template <typename T>
__device__ __forceinline__ int stage_next_batch(Stage<T>& s, const RasterArgs<T>& p,
                                                const TileRun& run, int32_t b0, bool done) {
  const int nthreads = static_cast<int>(blockDim.x);
  if (__syncthreads_count(done) == nthreads) return 0;
  const int32_t i = b0 + static_cast<int32_t>(threadIdx.x);
  if (i < run.end) stage_gaussian(s, threadIdx.x, p, p.flatten_ids[i]);
  __syncthreads();
  return min(nthreads, run.end - b0);
}

// Sum over the 32 lanes of a warp; every lane must call it (lane 0 gets the total).
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

// Adds a warp total to global memory from lane 0, skipping zeros (most pairs touch few params).
template <typename T>
__device__ __forceinline__ void warp_add(T* dst, T v) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0 && v != T(0)) atomicAdd(dst, v);
}

}  // namespace gpu
}  // namespace gsrender
