// Lane-level bookkeeping of the Tensor Core BACKWARD rasterizer
// (csrc/cuda/rasterize_mma_bwd_kernel.cu, docs/design.md §5.4): where each lane stages Ĝ / F̃ / W rows in the warp's shared buffers, which shared
// row each lane hands to ldmatrix for the v_W = Ĝ·F̃ᵀ and v_F = Wᵀ·Ĝ operands, the unscaling of the
// v_W fragment into the lane's 4 Gaussian columns, the front-to-back suffix sums of the sorted mode
// (each column's CompositorGrad state) and the reduction of a column over the 8 lanes that own it. Everything is
// GSR_HOST_DEVICE and written against the same abstract lane types as gsrender/mma_fragments.h;
// on the CPU they run inside the kernel under the SIMT runtime (tools/simt, docs/cuda.md).
//
// Shared buffers of one warp (rows of kBwdStride halves, 16-byte aligned):
//   g[32][·]: Ĝ of one channel batch of 16, row 16b + r = m16 row r of block b (sub-tile pixel)
//   f[16][·]: F̃ of the group's 16 Gaussians (row = packed column), one channel batch
//   w[32][·]: W of the group, row = pixel as in g, cols 0–15 = the group's Gaussian columns
// ldmatrix (ptx.cuh): lane l addresses row l&7 of 8×8 matrix m = l>>3; plain r[m] = M_m[g][2t..],
// .trans r[m] = M_m[2t..][g]. The maps below pick M_0..M_3 so r is the m16n8k16 fragment wanted.
#pragma once
#include <cstdint>

#include "gsrender/alpha.h"
#include "gsrender/composite.h"
#include "gsrender/mma_fragments.h"

namespace gsrender {
namespace mma {

constexpr int kBwdChannels = 16;                  // channels per batch: v_W's k16, v_F's two n8
constexpr int kBwdStride = kBwdChannels + 8;      // halves per shared row (48 bytes)
constexpr int kBwdRows = kBlocks * kM;            // sub-tile pixels = rows of g and w

// A shared (row, column) position; column in operand elements (halves).
struct SmemAt {
  int row, col;
};

// ---------------------------------------------------------------------------- staging (cp.async)

// Ĝ staging item q ∈ [0, 64) (lane q and lane q − 32 on the second pass): shared row q>>1,
// channel segment 8·(q&1) of the batch; its pixel is (subtile_px, subtile_py) of that row.
GSR_HOST_DEVICE SmemAt g_stage(int q) { return {q >> 1, 8 * (q & 1)}; }
// F̃ staging: lane l copies segment 8·(l&1) of the group's Gaussian column l>>1.
GSR_HOST_DEVICE SmemAt f_stage(int lane) { return {lane >> 1, 8 * (lane & 1)}; }

// The lane's W of one pixel row (block b, row half h) as two .b32 words of the w buffer's row
// subtile row (g + 8h of block b): word t holds columns 2t, 2t+1 (j = 0, 1), word 4 + t columns
// 2t+8, 2t+9 (j = 2, 3).
GSR_HOST_DEVICE int w_stage_row(int lane, int block, int h) {
  return kM * block + (lane >> 2) + 8 * h;
}
template <bool kBf16>
GSR_HOST_DEVICE void w_stage_words(const float (&w)[4], uint32_t& lo, uint32_t& hi) {
  lo = kBf16 ? pack_bf162(w[0], w[1]) : pack_half2(w[0], w[1]);
  hi = kBf16 ? pack_bf162(w[2], w[3]) : pack_half2(w[2], w[3]);
}

// ---------------------------------------------------------------------------- ldmatrix addresses

// v_W, A = Ĝ of block b (rows = pixels, k = channels), ldmatrix.x4: M_0 = rows 0–7 / k 0–7,
// M_1 = rows 8–15 / k 0–7, M_2 = rows 0–7 / k 8–15, M_3 = rows 8–15 / k 8–15.
GSR_HOST_DEVICE SmemAt dw_a_at(int lane, int block) {
  const int m = lane >> 3, i = lane & 7;
  return {kM * block + i + 8 * (m & 1), 8 * (m >> 1)};
}
// v_W, B = F̃ᵀ (k = channels, n = Gaussians) from f[Gaussian][channel], ldmatrix.x4: registers 0, 1
// = n8 tile 0 (Gaussians 0–7, k 0–7 | 8–15), registers 2, 3 = n8 tile 1 (Gaussians 8–15).
GSR_HOST_DEVICE SmemAt dw_b_at(int lane) {
  const int m = lane >> 3, i = lane & 7;
  return {i + 8 * (m >> 1), 8 * (m & 1)};
}
// v_F, A = Wᵀ of block b (rows = Gaussians, k = pixels) from w[pixel][Gaussian], ldmatrix.x4.trans:
// M_0 = pixels 0–7 / Gaussians 0–7, M_1 = pixels 0–7 / Gaussians 8–15, M_2 = pixels 8–15 /
// Gaussians 0–7, M_3 = pixels 8–15 / Gaussians 8–15.
GSR_HOST_DEVICE SmemAt df_a_at(int lane, int block) {
  const int m = lane >> 3, i = lane & 7;
  return {kM * block + i + 8 * (m >> 1), 8 * (m & 1)};
}
// v_F, B = Ĝ of block b (k = pixels, n = channels 8·nt ..) from g[pixel][channel]:
// ldmatrix.x2.trans.
GSR_HOST_DEVICE SmemAt df_b_at(int lane, int block, int nt) {
  return {kM * block + ldmatrix_x2_row(lane), 8 * nt};
}

// ---------------------------------------------------------------------------- fragments → pairs

// v_W of the lane's 4 columns for row half h of one block, unscaled by s_F: the v_W C fragments of
// the block (v_w[nt][e]: n8 tile nt = Gaussians 8nt.., element e = pixel row g + 8(e>>1), column
// 2t + (e&1)) hold column j in tile j>>1, element 2h + (j&1).
template <class V>
GSR_HOST_DEVICE void lane_v_w(const V (&v_w)[2][4], int h, const V& s_f, V (&v_wp)[4]) {
GSR_UNROLL
  for (int j = 0; j < 4; ++j) v_wp[j] = v_w[j >> 1][2 * h + (j & 1)] * s_f;
}

// v_F C element e of a lane: Gaussian column c_row(lane, e), channel 8nt + c_col(lane, e).

// Sorted mode, one pixel row of one batch, walked front to back by CompositorGrad<…, true>
// (gsrender/composite.h): col[j] ← pixel carried past the row's columns in front of the lane's
// column j (their w·v_w summed by the quad scan, the row's columns in list order across the
// quad), so col[j].step takes column j's own term off and has S after it; pixel ← pixel carried
// past the whole row, so pixel.s walks from S_total down.
template <class V, class I, class Q, class G>
GSR_HOST_DEVICE void row_suffix_sums(const V (&w)[4], const V (&v_wp)[4], const I& t, Q& q,
                                     G& pixel, G (&col)[4]) {
  V x[4], before[4], total;
GSR_UNROLL
  for (int j = 0; j < 4; ++j) x[j] = w[j] * v_wp[j];
  row_prefix_sum(x, t, q, before, total);
GSR_UNROLL
  for (int j = 0; j < 4; ++j) {
    col[j] = pixel;
    col[j].pass(before[j]);
  }
  pixel.pass(total);
}

// ---------------------------------------------------------------------------- column reduction

// Sum of v over the 8 lanes sharing the lane's quad position t (one Gaussian column per j):
// butterfly over lane bits 2–4. X: a full-warp xor shuffle (xor_(v, mask)).
template <class V, class X>
GSR_HOST_DEVICE V column_sum(V v, X& x) {
GSR_UNROLL
  for (int off = 4; off < kWarpSize; off <<= 1) v = v + x.xor_(v, off);
  return v;
}

#if defined(__CUDACC__) || defined(GSR_SIMT)
// The device warp for column_sum: xor shuffles across all 32 lanes (all converged).
struct DeviceWarp {
  template <class T>
  __device__ __forceinline__ T xor_(T v, int m) const { return __shfl_xor_sync(0xffffffffu, v, m); }
};
#endif

}  // namespace mma
}  // namespace gsrender
