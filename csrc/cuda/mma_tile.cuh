// The tile walk both Tensor Core rasterizer kernels share (rasterize_mma_fwd.cu and
// rasterize_mma_bwd.cu): a 16×16 tile per block of 8 warps, warp w on the 8×4 sub-tile at
// (8·(w&1), 4·(w>>1)); the tile's depth-ordered list staged in chunks of 256 entries (one per
// thread) with their exact α ≥ 1/255 support boxes; per warp, the chunk packed to the entries
// whose box meets its sub-tile (ballot + popc, order kept); per group of 16 packed entries, the
// lane's 4 Gaussian columns in the m16n8k16 A layout (gsrender/mma_fragments.h).
#pragma once
#include "gsrender/mma_fragments.h"
#include "raster_common.cuh"

namespace gsrender {
namespace gpu {

constexpr int kMmaWarps = 8;
constexpr int kMmaThreads = kMmaWarps * 32;
static_assert(kMmaThreads == kMaxThreads, "Stage holds one entry per thread");
constexpr unsigned kFullMask = 0xffffffffu;

struct ChunkStage {
  Stage<float> s;                           // the chunk's list entries
  PixelBox box[kMmaThreads];                // their support boxes
  uint8_t packed[kMmaWarps][kMmaThreads];   // per warp: chunk slots meeting its sub-tile
};

// Pixel origin of warp `warp`'s sub-tile in tile `run`.
__device__ __forceinline__ int subtile_x(const TileRun& run, int warp) {
  return run.tx * 16 + mma::kSubW * (warp & 1);
}
__device__ __forceinline__ int subtile_y(const TileRun& run, int warp) {
  return run.ty * 16 + mma::kSubH * (warp >> 1);
}

// The lane's pixel (ox + g, oy + 2b + h) lies inside the image.
__device__ __forceinline__ bool lane_inside(const RasterArgs<float>& p, int ox, int oy, int lane,
                                            int b, int h) {
  return ox + mma::lane_px(lane) < p.width && oy + mma::lane_py(b, h) < p.height;
}

__device__ __forceinline__ bool all_done(const bool (&done)[2][2]) {
  return done[0][0] && done[0][1] && done[1][0] && done[1][1];
}

// The head of the chunked list walk both MMA kernels share (every thread calls it, with its
// warp's warp_done): returns -1 when every warp of the block is done, else stages the chunk
// starting at chunk0 (entry chunk0 + threadIdx.x and its support box, one per thread) and returns
// its entry count. The done-count is also the barrier that keeps this chunk's staging from
// overwriting entries another warp still reads; the second barrier publishes the staging.
__device__ __forceinline__ int begin_chunk(ChunkStage& cs, const RasterArgs<float>& p,
                                           int32_t chunk0, int32_t end, int lane, bool warp_done) {
  if (__syncthreads_count(lane == 0 && warp_done) == kMmaWarps) return -1;
  const int k = threadIdx.x;
  const int32_t i = chunk0 + k;
  if (i < end) {
    stage_gaussian(cs.s, k, p, p.flatten_ids[i]);
    cs.box[k] = support_pixel_box<float>(cs.s.mx[k], cs.s.my[k], cs.s.a[k], cs.s.b[k],
                                         cs.s.c[k], cs.s.opacity[k]);
  }
  __syncthreads();
  return min(kMmaThreads, end - chunk0);
}

// Packs the chunk's first n slots for the warp's sub-tile at (ox, oy) into cs.packed[warp], in
// list order; returns their count (the same in every lane).
__device__ __forceinline__ int pack_subtile(ChunkStage& cs, int warp, int lane, int n, int ox,
                                            int oy) {
  uint8_t* packed = cs.packed[warp];
  int count = 0;
  for (int base = 0; base < n; base += 32) {
    const int j = base + lane;
    const bool hit = j < n && cs.box[j].meets(ox, oy, ox + mma::kSubW - 1, oy + mma::kSubH - 1);
    const unsigned m = __ballot_sync(kFullMask, hit);
    if (hit) packed[count + __popc(m & ((1u << lane) - 1u))] = static_cast<uint8_t>(j);
    count += __popc(m);
  }
  __syncwarp();
  return count;
}

// The lane's 4 Gaussian columns of the group starting at packed slot g0 (padding past `count`:
// opacity 0 → α 0, pos1 0). pos1 = list position + 1 (chunk0 + slot + 1).
__device__ __forceinline__ void lane_columns(const ChunkStage& cs, const uint8_t* packed, int lane,
                                             int g0, int count, int32_t chunk0,
                                             mma::LaneGaussians<float>& lg, int (&pos1)[4],
                                             float (&phi)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int k = g0 + mma::lane_col(lane, j);
    const bool ok = k < count;
    const int e = ok ? packed[k] : 0;
    lg.mx[j] = cs.s.mx[e], lg.my[j] = cs.s.my[e];
    lg.a[j] = cs.s.a[e], lg.b[j] = cs.s.b[e], lg.c[j] = cs.s.c[e];
    lg.opacity[j] = ok ? cs.s.opacity[e] : 0.0f;
    phi[j] = cs.s.phi[e];
    pos1[j] = ok ? chunk0 + e + 1 : 0;
  }
}

}  // namespace gpu
}  // namespace gsrender
