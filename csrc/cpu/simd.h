// Vectorisation helpers for the CPU kernels: an exp the compiler can vectorise, and function
// multi-versioning so one binary runs AVX2+FMA code where the CPU has it and SSE2 code elsewhere.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GSR_CPU_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define GSR_CPU_CLONES
#endif

namespace gsrender {
namespace cpu {

// exp(x) for x <= 0 in float, branch-free so `#pragma omp simd` loops vectorise it (libm's expf
// does not). Cody–Waite range reduction + degree-6 polynomial: relative error < 2e-7, i.e. within
// float rounding of std::exp; exp(x) = 0 below -87.
inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : (x > 0.0f ? 0.0f : x);
  // round to nearest by the 1.5·2^23 trick (vectorises on plain SSE2, unlike nearbyint)
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}
// float64 (gradcheck, references) keeps libm's exact exp.
inline double exp_nonpositive(double x) { return std::exp(x); }

}  // namespace cpu
}  // namespace gsrender
