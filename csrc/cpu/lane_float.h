// LaneF: 8 floats (a cpu::f8), one per lane, usable as T in the shared per-Gaussian templates
// (gsrender/math.h, projection.h, sh.h), so a CPU kernel runs 8 Gaussians through the scalar
// code's operations at once: T(c) broadcasts c, each operator is the lane-wise float operation,
// comparisons give a LaneM mask, and gsr_sqrt / gsr_min / gsr_max / gsr_ceil / gsr_log (found by
// argument-dependent lookup) are lane-wise too. Every lane therefore computes the scalar's float
// operations in the scalar's order, and since no copy contracts products and sums into FMAs
// (-ffp-contract=off, setup.py: GCC's contraction depends on the context, so a scalar loop and
// the same expression across lanes would round differently), each lane gives the scalar's bits.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include <xmmintrin.h>

#include "simd.h"

namespace gsrender {
namespace cpu {

struct LaneM {
  i8 m;  // 0 / −1 per lane
};
#define GSR_LANE [[gnu::always_inline]] inline
GSR_LANE LaneM operator&(LaneM a, LaneM b) { return {a.m & b.m}; }
GSR_LANE LaneM operator|(LaneM a, LaneM b) { return {a.m | b.m}; }
GSR_LANE LaneM operator||(LaneM a, LaneM b) { return {a.m | b.m}; }
GSR_LANE LaneM operator!(LaneM a) { return {~a.m}; }

struct LaneF {
  f8 v;
  LaneF() = default;
  GSR_LANE LaneF(f8 x) : v(x) {}
  GSR_LANE explicit LaneF(float c) : v(splat(c)) {}
  GSR_LANE explicit LaneF(double c) : v(splat(float(c))) {}  // T(c) of a double constant
  GSR_LANE explicit LaneF(int c) : v(splat(float(c))) {}
  GSR_LANE float operator[](int l) const { return v[l]; }
  GSR_LANE LaneF& operator+=(LaneF b) { v += b.v; return *this; }
  GSR_LANE LaneF& operator-=(LaneF b) { v -= b.v; return *this; }
  GSR_LANE LaneF& operator*=(LaneF b) { v *= b.v; return *this; }
};
GSR_LANE LaneF operator+(LaneF a, LaneF b) { return a.v + b.v; }
GSR_LANE LaneF operator-(LaneF a, LaneF b) { return a.v - b.v; }
GSR_LANE LaneF operator*(LaneF a, LaneF b) { return a.v * b.v; }
GSR_LANE LaneF operator/(LaneF a, LaneF b) { return a.v / b.v; }
GSR_LANE LaneF operator-(LaneF a) { return -a.v; }
GSR_LANE LaneM operator<(LaneF a, LaneF b) { return {a.v < b.v}; }
GSR_LANE LaneM operator<=(LaneF a, LaneF b) { return {a.v <= b.v}; }
GSR_LANE LaneM operator>(LaneF a, LaneF b) { return {a.v > b.v}; }
GSR_LANE LaneM operator>=(LaneF a, LaneF b) { return {a.v >= b.v}; }
// m ? a : b per lane
GSR_LANE LaneF select(LaneM m, LaneF a, LaneF b) { return m.m ? a.v : b.v; }

// math.h's scalar helpers, lane-wise: vector instructions where they give the scalar's exact
// result, the scalar library call per lane where none does (log)
GSR_LANE LaneF gsr_select(LaneM m, LaneF a, LaneF b) { return select(m, a, b); }
GSR_LANE LaneF gsr_min(LaneF a, LaneF b) { return select(a < b, a, b); }
GSR_LANE LaneF gsr_max(LaneF a, LaneF b) { return select(a > b, a, b); }
// sqrtps, correctly rounded as sqrtf is (IEEE), on the two 4-float halves: SSE is in every ISA
// copy. A loop of std::sqrt is a scalar sqrtss and a branch to glibc per lane (errno); GCC
// vectorises it only under -fno-math-errno for the whole build (a pragma does not), which made
// the raster forward 3 % slower (docs/cpu.md, "Tried and not kept").
GSR_LANE LaneF gsr_sqrt(LaneF a) {
  __m128 half[2];
  std::memcpy(half, &a.v, sizeof(f8));
  half[0] = _mm_sqrt_ps(half[0]), half[1] = _mm_sqrt_ps(half[1]);
  std::memcpy(&a.v, half, sizeof(f8));
  return a;
}
// ceilf's bits without a rounding per lane (GCC does not vectorise std::ceil, and the baseline
// copy has no rounding instruction): below 2^23 in magnitude a float converts to int exactly, the
// truncation is raised by one where it fell below x, and x's sign is kept (ceil(−0.5) = −0);
// from 2^23 on (and ±inf, NaN) every float is its own ceil.
GSR_LANE LaneF gsr_ceil(LaneF a) {
  const i8 sign = (i8)a.v & int32_t(0x80000000);
  const f8 mag = (f8)((i8)a.v & int32_t(0x7fffffff));
  const f8 t = __builtin_convertvector(__builtin_convertvector(a.v, i8), f8);
  const f8 up = t < a.v ? t + 1.0f : t;
  const f8 signed_up = (f8)((i8)up | sign);
  return mag < 8388608.0f ? signed_up : a.v;
}
// logf per lane, declared const: a libm call may set errno, so GCC keeps each one in place
// among the memory operations, and every call clobbers all vector registers; as a const call
// (errno is never read here) it is free to schedule the eight where fewer values are live.
// project_fwd at 1M, alternated builds, 3 rounds: 11.3 → 10.8 ms (two threads), 22.3 → 21.2 (one).
[[gnu::const, gnu::noinline]] inline float logf_const(float x) { return logf(x); }
GSR_LANE LaneF gsr_log(LaneF a) {
  for (int l = 0; l < kLanes; ++l) a.v[l] = logf_const(a.v[l]);
  return a;
}
GSR_LANE LaneF gsr_rounded(LaneF a) { return __builtin_assoc_barrier(a.v); }  // (common.h)

// R vectors from 8 records `stride` floats apart: field r of record l in lane l of rows[r] (the
// per-Gaussian kernels' inputs, one vector per field).
template <int R>
GSR_LANE void load_lanes(const float* first, int64_t stride, LaneF* rows) {
  float in[R][kLanes];
  for (int l = 0; l < kLanes; ++l)
    for (int r = 0; r < R; ++r) in[r][l] = first[l * stride + r];
  for (int r = 0; r < R; ++r) std::memcpy(&rows[r].v, in[r], sizeof(f8));
}
#undef GSR_LANE

}  // namespace cpu
}  // namespace gsrender
