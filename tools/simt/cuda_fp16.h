// SIMT stand-in for cuda_fp16.h: the conversions the kernels use (round to nearest even, by the
// host compiler's _Float16).
#pragma once
#include <cstdint>
#include <cstring>

#include "simt.h"

struct __half {
  uint16_t bits;
};
struct __half2 {
  __half x, y;  // x: bits 0–15
};
inline __half __float2half_rn(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  __half r;
  std::memcpy(&r.bits, &h, 2);
  return r;
}
inline float __half2float(__half h) {
  _Float16 v;
  std::memcpy(&v, &h.bits, 2);
  return static_cast<float>(v);
}
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
inline __half2 __floats2half2_rn(float lo, float hi) {
  return {__float2half_rn(lo), __float2half_rn(hi)};
}
