// Eight pixels of one image row as one vector: the lane types of the row rasterizer and its α.
// Lanes run over pixels (not Gaussians), so the front-to-back transmittance scan, the early stop
// and the weights are vector operations per Gaussian, exactly the sequential per-pixel rule.
#pragma once
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "gsrender/alpha.h"
#include "host_blocks.h"
#include "simd.h"

namespace gsrender {
namespace cpu {

template <typename T>
struct Lanes;
template <>
struct Lanes<float> {
  typedef float V __attribute__((vector_size(32)));
  typedef int32_t M __attribute__((vector_size(32)));  // comparison masks (0 / −1 per lane)
};
template <>
struct Lanes<double> {
  typedef double V __attribute__((vector_size(64)));
  typedef int64_t M __attribute__((vector_size(64)));
};
static_assert(sizeof(Lanes<float>::V) / sizeof(float) == kLanes, "8 pixels per row segment");

// Lane vectors, each on its own aligned slot.
template <typename V>
using LaneVector = std::vector<V, HostAlloc<V, sizeof(V)>>;
// Values from a cache-line boundary: rows of whole vectors (a multiple of 32 bytes) then never
// straddle two lines.
template <typename T>
using LineVector = std::vector<T, HostAlloc<T, 64>>;

typedef uint64_t u64x2 __attribute__((vector_size(16)));
typedef uint64_t u64x4 __attribute__((vector_size(32)));
typedef uint64_t u64x8 __attribute__((vector_size(64)));
__attribute__((always_inline)) inline u64x2 fold_halves(const u64x4& v) {
  return __builtin_shufflevector(v, v, 0, 1) | __builtin_shufflevector(v, v, 2, 3);
}
__attribute__((always_inline)) inline u64x4 fold_halves(const u64x8& v) {
  return __builtin_shufflevector(v, v, 0, 1, 2, 3) | __builtin_shufflevector(v, v, 4, 5, 6, 7);
}

// The OR of m's lanes: its halves OR-ed together in vector registers down to 128 bits, then its
// two 64-bit words (no target-specific movemask; one extract fewer per half folded).
template <typename M>
__attribute__((always_inline)) inline uint64_t fold_lanes(const M& m) {
  static_assert(sizeof(M) == 32 || sizeof(M) == 64, "8 lanes of 32 or 64 bits");
  u64x2 x;
  if constexpr (sizeof(M) == 32) {
    u64x4 u;
    std::memcpy(&u, &m, sizeof(M));
    x = fold_halves(u);
  } else {
    u64x8 u;
    std::memcpy(&u, &m, sizeof(M));
    x = fold_halves(fold_halves(u));
  }
  return x[0] | x[1];
}

// Any lane of a mask set.
template <typename M>
__attribute__((always_inline)) inline bool any_lane(const M& m) {
  return fold_lanes(m) != 0;
}

// The bits set in some lane of m, as an integer: any_lane of several masks at once, one fold
// for all, when each mask is first reduced to its own bit (m & bit; bits 0–31).
template <typename M>
__attribute__((always_inline)) inline uint32_t lane_bits(const M& m) {
  const uint64_t w = fold_lanes(m);
  return uint32_t(w | (w >> 32));
}

// Whether any of m's lanes 0–3 (lo) and any of its lanes 4–7 (hi) is set: a segment's two
// 4-pixel halves.
template <typename M>
__attribute__((always_inline)) inline void any_lane_halves(const M& m, bool& lo, bool& hi) {
  static_assert(sizeof(M) == 32 || sizeof(M) == 64, "8 lanes of 32 or 64 bits");
  constexpr int kWords = sizeof(M) / 8;
  uint64_t u[kWords];
  std::memcpy(u, &m, sizeof(M));
  uint64_t l = 0, h = 0;
  for (int i = 0; i < kWords / 2; ++i) l |= u[i], h |= u[kWords / 2 + i];
  lo = l != 0, hi = h != 0;
}

template <typename V>
__attribute__((always_inline)) inline auto lane_sum(const V& v) {
  auto s = v[0];
  for (int i = 1; i < kLanes; ++i) s += v[i];
  return s;
}

// Σ a[i]·b[i] over n values as 8 partial sums, one per lane, then theirs: an in-order sum would be
// a chain of n dependent adds (the compiler may not reorder them), 68 at D = 64.
template <typename T>
__attribute__((always_inline)) inline T lane_dot(const T* a, const T* b, int64_t n) {
  typename Lanes<T>::V acc{}, x, y;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    std::memcpy(&x, a + i, sizeof(x)), std::memcpy(&y, b + i, sizeof(y));
    acc += x * y;
  }
  T s = lane_sum(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// α of one Gaussian along one pixel row (py), at 8 pixel centres px a call: gsrender::pair_alpha's
// rule. Built once per (row segment, Gaussian) from its scalars; the forward and the backward's
// replay both evaluate α through it, so they agree bit for bit. float64 runs the shared scalar
// formula lane by lane (it serves gradcheck).
template <typename T>
struct RowAlpha {
  using V = typename Lanes<T>::V;
  T opacity, a, b, c, mx, dy;
  RowAlpha(T opacity_, T /*log_opacity*/, T mx_, T my, T a_, T b_, T c_, T py)
      : opacity(opacity_), a(a_), b(b_), c(c_), mx(mx_), dy(my - py) {}
  __attribute__((always_inline)) V operator()(const V& px) const {
    V al;
    for (int i = 0; i < kLanes; ++i)
      al[i] = pair_alpha<T>(opacity, gaussian_sigma<T>(a, b, c, mx - px[i], dy));
    return al;
  }
};

// float: along the row σ = ½a·dx² + b·dy·dx + ½c·dy² is a quadratic in dx = mx − px, so with
// ln o folded in, ln(o·e^{−σ}) = E − (½a·dx + b·dy)·dx, E = ln o − ½c·dy², is two FMAs per 8
// lanes from three per-row scalars; then one exp (exp_nonpositive: x > 0, from o > 1, gives 1,
// which the 0.99 cap makes exact). pair_alpha's σ ≥ 0 test is not repeated: the row kernels only
// see Gaussians the tile test kept (a > 0, ac − b² > 0: RowGaussian::bound), where σ ≥ 0 holds, and
// in float it could only fire on rounding at σ ≈ 0, where α = o is the right value.
template <>
struct RowAlpha<float> {
  float ha, bdy, e, mx;
  RowAlpha(float, float log_opacity, float mx_, float my, float a, float b, float c, float py) {
    const float dy = my - py;
    ha = 0.5f * a, bdy = b * dy, e = log_opacity - 0.5f * c * dy * dy, mx = mx_;
  }
  __attribute__((always_inline)) f8 operator()(const f8& px) const {
    const f8 dx = mx - px;
    f8 al = exp_nonpositive(e - (ha * dx + bdy) * dx);
    al = al < splat(float(kAlphaMax)) ? al : splat(float(kAlphaMax));
    return al >= splat(float(kAlphaMin)) ? al : splat(0.0f);
  }
};

}  // namespace cpu
}  // namespace gsrender
