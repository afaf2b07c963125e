// Vectorisation helpers for the CPU kernels: 8-float vectors and an exp the compiler can
// vectorise. Which instructions they compile to (AVX-512F, AVX2+FMA or SSE2) is chosen at run time
// by the caller's cpu::parallel_for / cpu::dispatch (isa.h).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

// GSR_CPU_CLONES (GCC target_clones, fixed once per process by the loader) is replaced by isa.h:
// drop it from a function; the function runs in the active ISA's copy when reached from a
// cpu::parallel_for chunk or cpu::dispatch.
#pragma GCC poison GSR_CPU_CLONES

namespace gsrender {
namespace cpu {

// 8 floats: GCC vector extensions give branch-free SIMD code in every ISA's copy (two SSE halves
// in the baseline one), which auto-vectorisation does not reliably do for the α loop.
// The helpers are always inlined, so the vector-argument ABI note GCC gives for the baseline
// (non-AVX) copy does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float f8 __attribute__((vector_size(32)));
typedef int32_t i8 __attribute__((vector_size(32)));
constexpr int kLanes = 8;

__attribute__((always_inline)) inline f8 splat(float v) { return f8{v, v, v, v, v, v, v, v}; }

// 32 bytes of T as a GCC vector (every ISA copy; two halves in the baseline's). A struct's
// typedef: GCC drops the attribute from an alias template.
template <typename T>
struct Vec32Of {
  typedef T V __attribute__((vector_size(32)));
};
template <typename T>
using Vec32 = typename Vec32Of<T>::V;
template <typename T>
constexpr int kPer32 = 32 / sizeof(T);

// Whether any of p[0, n) is NaN or ±Inf: its exponent bits all ones. 32 bytes at a time as
// integer lanes, ORing each lane's test (no float sum whose order would have to be kept); the
// tail one by one.
template <typename T>
inline bool any_nonfinite(const T* p, int64_t n) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  using UV = Vec32<U>;
  constexpr int kPer = kPer32<T>;
  constexpr U kExp = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  UV bad{};
  int64_t i = 0;
  for (; i + kPer <= n; i += kPer) {
    UV b;
    std::memcpy(&b, p + i, sizeof(UV));
    bad |= UV((b & kExp) == kExp);
  }
  U any = 0;
  for (int l = 0; l < kPer; ++l) any |= bad[l];
  for (; i < n; ++i) {
    U b;
    std::memcpy(&b, p + i, sizeof(U));
    any |= (b & kExp) == kExp;
  }
  return any != 0;
}

// exp(x) for x <= 0 (x > 0 gives 1: the α cap 0.99 is below it), 0 below -87. The α it serves
// only matters on [ln(1/255), 0] (α = exp(ln o − σ) is zeroed below 1/255 and capped at 0.99), so
// n = round(x·log2 e) ∈ [−8, 0] there and one FMA with float ln 2 reduces x (error n·1.9e-9;
// no Cody–Waite split needed). exp(r) on |r| ≤ ln2/2 is 1 + r + r²·q(r), q of degree 3 with
// near-minimax coefficients (fitted for the relative error): < 2e-7 relative in float, against
// the 1e-4 tolerances of the float32 outputs and the ~5e-7 rounding of σ itself.
__attribute__((always_inline)) inline f8 exp_nonpositive(const f8& x_in) {
  f8 x = x_in;
  x = x > splat(-87.0f) ? x : splat(-87.0f);
  x = x < splat(0.0f) ? x : splat(0.0f);
  // round to nearest with the 1.5·2^23 trick
  const f8 n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const f8 r = x - n * 0.693147182464599609375f;
  f8 p = splat(8.312512189149857e-3f);
  p = p * r + 4.189010709524155e-2f;
  p = p * r + 1.6667114198207855e-1f;
  p = p * r + 4.99992311000824e-1f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const i8 bits = (__builtin_convertvector(n, i8) + 127) << 23;
  return p * (f8)bits;  // reinterpret the exponent bits (same-size vector cast)
}

}  // namespace cpu
}  // namespace gsrender
