// Lane-level bookkeeping of the Tensor Core rasterizer (docs/design.md §5.1, §5.4): which (pixel, Gaussian)
// pairs and (Gaussian, channel) elements each lane owns for
// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`, α for the lane's pairs, the transmittance
// scan along a row inside a quad with the exact early stop, f16x2 packing and the C-fragment →
// (pixel, channel) map. The kernels include it; on the CPU it runs inside the kernels themselves
// under the SIMT runtime (tools/simt, docs/cuda.md), whose MMA / ldmatrix emulation is written
// from the PTX ISA tables independently of the maps below.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16", g = lane>>2, t = lane&3):
//   A 16×16 (rows = pixels, cols = Gaussians), 4 × .b32 registers of 2 halves, element i ∈ [0,8):
//     register i>>1, half i&1 (low 16 bits = lower column);
//     row = g + 8·((i>>1)&1), col = 2t + (i&1) + 8·(i>>2)
//     R0 = (g, 2t..2t+1)  R1 = (g+8, 2t..2t+1)  R2 = (g, 2t+8..2t+9)  R3 = (g+8, 2t+8..2t+9)
//   B 16×8 (rows k = Gaussians, cols n = channels), 2 registers, element i ∈ [0,4):
//     k = 2t + (i&1) + 8·(i>>1), n = g
//   C/D 16×8 f32, element i ∈ [0,4): row = g + 8·(i>>1), col = 2t + (i&1)
// Warp sub-tile (8×4 pixels, pixel p = py·8 + px) = two m16 row blocks: block b holds sub-tile
// rows 2b (m16 rows 0–7) and 2b+1 (rows 8–15), so m16 row r of block b is pixel 16b + r and a lane
// owns the sub-tile column px = g: pixels (g, 2b + h) for h ∈ {0, 1} in each block.
//
// Shuffle-using functions are written against an abstract quad `Q` (q.up / q.idx / q.xor_ within
// groups of 4 lanes) and generic lane types: on the device V = float, I = int, M = bool (one
// lane's registers, Q = DeviceQuad). They only use sel / vmin / vmax / arithmetic / comparisons.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "gsrender/alpha.h"
#include "gsrender/common.h"
#include "gsrender/composite.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace gsrender {
namespace mma {

constexpr int kWarpSize = 32;
constexpr int kM = 16, kN = 8, kK = 16;  // m16n8k16: 16 pixels × 8 channels × 16 Gaussians
constexpr int kSubW = 8, kSubH = 4;      // a warp's sub-tile (docs/design.md §5.1)
constexpr int kBlocks = 2;               // m16 row blocks per sub-tile

GSR_HOST_DEVICE int lane_group(int lane) { return lane >> 2; }  // g
GSR_HOST_DEVICE int lane_quad(int lane) { return lane & 3; }    // t

// ---------------------------------------------------------------------------- fragment maps

// A element i ∈ [0,8) of a lane.
GSR_HOST_DEVICE int a_row(int lane, int i) { return (lane >> 2) + 8 * ((i >> 1) & 1); }
GSR_HOST_DEVICE int a_col(int lane, int i) { return 2 * (lane & 3) + (i & 1) + 8 * (i >> 2); }
// B element i ∈ [0,4): k (Gaussian) and n (channel).
GSR_HOST_DEVICE int b_row(int lane, int i) { return 2 * (lane & 3) + (i & 1) + 8 * (i >> 1); }
GSR_HOST_DEVICE int b_col(int lane, int /*i*/) { return lane >> 2; }
// C/D element i ∈ [0,4): pixel row and channel.
GSR_HOST_DEVICE int c_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
GSR_HOST_DEVICE int c_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

// The lane's j-th Gaussian column j ∈ [0,4): 2t, 2t+1, 2t+8, 2t+9 (A elements with row half h are
// i = 2h + (j&1) + 4·(j>>1)).
GSR_HOST_DEVICE int lane_col(int lane, int j) { return 2 * (lane & 3) + (j & 1) + 8 * (j >> 1); }
GSR_HOST_DEVICE int a_elem(int h, int j) { return 2 * h + (j & 1) + 4 * (j >> 1); }

// ldmatrix.sync.aligned.m8n8.x2.trans: lane l < 16 supplies the shared address of row l of the
// [16 Gaussians][8 channels] half block (matrix l>>3, its row l&7); lanes 16–31 are ignored.
// With .trans, lane receives stored[8m + 2t + h][g] in register m, half h — exactly B element
// i = 2m + h. Rows must be 16-byte aligned.
GSR_HOST_DEVICE int ldmatrix_x2_row(int lane) { return lane & 15; }

// Sub-tile pixel ↔ (m16 block, row).
GSR_HOST_DEVICE int subtile_px(int /*block*/, int row) { return row & 7; }
GSR_HOST_DEVICE int subtile_py(int block, int row) { return 2 * block + (row >> 3); }
GSR_HOST_DEVICE int subtile_block(int /*px*/, int py) { return py >> 1; }
GSR_HOST_DEVICE int subtile_row(int px, int py) { return px + 8 * (py & 1); }
// The lane's pixel for row half h of block b (A rows g + 8h, C elements with i>>1 == h).
GSR_HOST_DEVICE int lane_px(int lane) { return lane >> 2; }
GSR_HOST_DEVICE int lane_py(int block, int h) { return 2 * block + h; }

// ---------------------------------------------------------------------------- α of the lane

// The lane's 4 Gaussian columns of one batch of 16 (on the GPU read from the warp's packed batch
// in shared memory at lane_col(lane, j)). Padding slots have opacity 0 (α = 0) and pos1 = 0.
template <typename T>
struct LaneGaussians {
  T mx[4], my[4], a[4], b[4], c[4], opacity[4];
};

// α of the lane's 2 pixels (rows g, g+8 of m16 block `block`) × 4 Gaussians: gsrender::pair_alpha,
// the rule every backend shares. (ox, oy): the sub-tile's pixel origin.
template <typename T>
GSR_HOST_DEVICE void lane_alpha(int lane, int block, int ox, int oy, const LaneGaussians<T>& lg,
                                T (&alpha)[2][4]) {
  const T px = ox + lane_px(lane) + T(0.5);
GSR_UNROLL
  for (int h = 0; h < 2; ++h) {
    const T py = oy + lane_py(block, h) + T(0.5);
GSR_UNROLL
    for (int j = 0; j < 4; ++j)
      alpha[h][j] = pair_alpha<T>(
          lg.opacity[j], gaussian_sigma<T>(lg.a[j], lg.b[j], lg.c[j], lg.mx[j] - px, lg.my[j] - py));
  }
}

// ---------------------------------------------------------------------------- lane-generic ops

// Scalar (one lane) versions of the lane operations the generic bodies use.
GSR_HOST_DEVICE float sel(bool c, float a, float b) { return c ? a : b; }
GSR_HOST_DEVICE int sel(bool c, int a, int b) { return c ? a : b; }
GSR_HOST_DEVICE float vmin(float a, float b) { return b < a ? b : a; }
GSR_HOST_DEVICE int vmax(int a, int b) { return b > a ? b : a; }

// Exclusive scan of one value per lane along the 4 lanes of a quad (t = 0..3) under an
// associative op with identity `id`: excl = op over lanes t' < t, total = op over all 4
// (broadcast from t = 3). Two shuffle-up steps (Hillis–Steele), one shift, one broadcast.
template <class V, class I, class Q, class Op>
GSR_HOST_DEVICE void quad_exclusive_scan(const V& x, const I& t, Q& q, Op op, const V& id, V& excl,
                                         V& total) {
  V incl = x;
  V up = q.up(incl, 1);
  incl = sel(t >= 1, op(incl, up), incl);
  up = q.up(incl, 2);
  incl = sel(t >= 2, op(incl, up), incl);
  excl = sel(t >= 1, q.up(incl, 1), id);
  total = q.idx(incl, 3);
}

struct Mul {
  template <class V>
  GSR_HOST_DEVICE V operator()(const V& a, const V& b) const { return a * b; }
};
struct Add {
  template <class V>
  GSR_HOST_DEVICE V operator()(const V& a, const V& b) const { return a + b; }
};

// Π (transmittance factors) and Σ (the backward's running w·v_W) along a quad.
template <class V, class I, class Q>
GSR_HOST_DEVICE void quad_exclusive_product(const V& p, const I& t, Q& q, V& excl, V& total) {
  quad_exclusive_scan(p, t, q, Mul{}, V(1.0f), excl, total);
}
template <class V, class I, class Q>
GSR_HOST_DEVICE void quad_exclusive_sum(const V& x, const I& t, Q& q, V& excl, V& total) {
  quad_exclusive_scan(x, t, q, Add{}, V(0.0f), excl, total);
}

// Per-column prefix of x along one pixel row of a batch (columns 0–7 over the quad's low pairs,
// then 8–15): before[j] = Σ of x over the row's columns in front of the lane's column j, and the
// row total (every lane of the quad gets the same total).
template <class V, class I, class Q>
GSR_HOST_DEVICE void row_prefix_sum(const V (&x)[4], const I& t, Q& q, V (&before)[4], V& total) {
  V excl_lo, tot_lo, excl_hi, tot_hi;
  quad_exclusive_sum(x[0] + x[1], t, q, excl_lo, tot_lo);
  quad_exclusive_sum(x[2] + x[3], t, q, excl_hi, tot_hi);
  before[0] = excl_lo;
  before[1] = excl_lo + x[0];
  before[2] = tot_lo + excl_hi;
  before[3] = before[2] + x[2];
  total = tot_lo + tot_hi;
}

// One pixel row of one m16 block for one batch of 16 Gaussians (docs/design.md §4, sorted mode):
//   in:  alpha[j] of the lane's 4 columns, pos1[j] = list position + 1 of column j (0 = padding),
//        pixel = the pixel's Compositor before the batch, done = the pixel stopped earlier (or
//        is outside the image)
//   out: w[j] = A·T·[T·(1−A) ≥ 1e-4] with everything from the first stop on excluded,
//        pixel.trans ← T after the last kept Gaussian, last ← max kept pos1, done ← stopped.
// The row's columns run 0–7 over the quad's low pairs, then 8–15 over its high pairs: T before a
// lane's low pair is T0·Π(lower lanes' low pairs), before its high pair T0·Π(all low pairs)·
// Π(lower lanes' high pairs). Each column then is one Compositor::take from that T: the pixel's
// compositor as a sequential walk would hold it there, so weight, stop and carried T are the
// rule every other walk runs. Exactness of the stop without a second scan: T after a
// contributing Gaussian (α ≥ 1/255) is at most (1 − 1/255)× the T after any earlier one, far
// beyond the few-ulp rounding of differently associated products, so once one contributing
// column stops every later contributing column computes T·(1−A) < 1e-4 too; columns with α = 0
// get w = 0 regardless. The carried T is therefore the min over kept columns (and T0), the last
// id the max, the stop flag the OR: three quad reductions all lanes of the quad agree on.
template <class V, class I, class M, class Q>
GSR_HOST_DEVICE void row_weights(const V (&alpha)[4], const I (&pos1)[4], const I& t, Q& q,
                                 Compositor<V, M, V>& pixel, M& done, I& last, V (&w)[4]) {
  V f[4];
GSR_UNROLL
  for (int j = 0; j < 4; ++j) f[j] = V(1.0f) - alpha[j];
  V x_lo, tot_lo, x_hi, tot_hi;
  quad_exclusive_product(f[0] * f[1], t, q, x_lo, tot_lo);
  quad_exclusive_product(f[2] * f[3], t, q, x_hi, tot_hi);
  V tb[4];  // T before each of the lane's columns
  tb[0] = pixel.trans * x_lo;
  tb[1] = tb[0] * f[0];
  tb[2] = pixel.trans * tot_lo * x_hi;
  tb[3] = tb[2] * f[2];
  V carry = pixel.trans;
  I lst = last;
  M stopped(false);
GSR_UNROLL
  for (int j = 0; j < 4; ++j) {
    const Compositor<V, M, V> before{true, tb[j]};  // the pixel before column j
    Compositor<V, M, V> col = before;
    M stop;
    const M keep = col.take(M((alpha[j] > V(0.0f)) & !done), alpha[j], V(0.0f), w[j], stop);
    carry = sel(keep, vmin(carry, before.after(alpha[j])), carry);  // = col.trans where kept
    lst = sel(keep, vmax(lst, pos1[j]), lst);
    stopped = stopped | stop;
  }
  carry = vmin(carry, q.xor_(carry, 1));
  carry = vmin(carry, q.xor_(carry, 2));
  lst = vmax(lst, q.xor_(lst, 1));
  lst = vmax(lst, q.xor_(lst, 2));
  I s = sel(stopped, I(1), I(0));
  s = vmax(s, q.xor_(s, 1));
  s = vmax(s, q.xor_(s, 2));
  pixel.trans = carry;
  last = lst;
  done = done | (s > I(0));
}

// One pixel row of one m16 block for one batch, weighted (sort-free) mode: w[j] = α·φ of the
// lane's columns (α already 0 for padding columns and pixels outside the image) by
// Compositor::advance from a fresh compositor, whose Σw and Π(1 − α) over the lane's columns,
// reduced across the quad to the row's 16, are added to pixel.wsum and multiplied into
// pixel.trans (every lane of the quad ends with the same values).
template <class V, class M, class Q>
GSR_HOST_DEVICE void row_weights_weighted(const V (&alpha)[4], const V (&phi)[4], Q& q,
                                          Compositor<V, M, V>& pixel, V (&w)[4]) {
  Compositor<V, M, V> cols{false};
GSR_UNROLL
  for (int j = 0; j < 4; ++j) w[j] = cols.advance(M(true), alpha[j], phi[j]);
  V sum = cols.wsum, prod = cols.trans;
  sum = sum + q.xor_(sum, 1);
  sum = sum + q.xor_(sum, 2);
  prod = prod * q.xor_(prod, 1);
  prod = prod * q.xor_(prod, 2);
  pixel.wsum = pixel.wsum + sum;
  pixel.trans = pixel.trans * prod;
}

#if defined(__CUDACC__) || defined(GSR_SIMT)  // GSR_SIMT: the CPU build of the kernels
// The device quad: shuffles within groups of 4 lanes. All 32 lanes must be converged.
struct DeviceQuad {
  template <class T>
  __device__ __forceinline__ T up(T v, int d) const { return __shfl_up_sync(0xffffffffu, v, d, 4); }
  template <class T>
  __device__ __forceinline__ T idx(T v, int src) const { return __shfl_sync(0xffffffffu, v, src, 4); }
  template <class T>
  __device__ __forceinline__ T xor_(T v, int m) const {
    return __shfl_xor_sync(0xffffffffu, v, m, 4);
  }
};
#endif

// ---------------------------------------------------------------------------- f16 / bf16 packing

// Two floats → one .b32 register: lo in bits 0–15 (the lower column/row), hi in bits 16–31.
GSR_HOST_DEVICE uint32_t pack_half2(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  uint32_t r;
  memcpy(&r, &v, 4);
  return r;
}

GSR_HOST_DEVICE uint32_t pack_bf162(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  uint32_t r;
  memcpy(&r, &v, 4);
  return r;
}

// The lane's W of one m16 block (w[h][j]: row half h, column j) → the 4 A registers:
// register r, half e is element i = 2r + e, i.e. h = r&1, j = e + 2·(r>>1).
template <bool kBf16 = false>
GSR_HOST_DEVICE void pack_a(const float (&w)[2][4], uint32_t (&reg)[4]) {
GSR_UNROLL
  for (int r = 0; r < 4; ++r) {
    const float lo = w[r & 1][2 * (r >> 1)], hi = w[r & 1][2 * (r >> 1) + 1];
    reg[r] = kBf16 ? pack_bf162(lo, hi) : pack_half2(lo, hi);
  }
}

}  // namespace mma
}  // namespace gsrender
