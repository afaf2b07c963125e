// _C.gaussian_faults (gaussian_checks.h): the Gaussians' finite and range checks in one parallel
// pass. render.py made them as one reduction per tensor and condition (sums for finiteness, the
// quaternions' norms, amin / aminmax): ~7 ms a forward at 1M Gaussians, the norms over [N, 4]
// alone 2.5–4 ms; here the 44 MB are read once, 1.4 ms (docs/cpu.md, "Per-Gaussian
// stages").
#include "gaussian_checks.h"

#include <ATen/Dispatch.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "cpu/isa.h"
#include "cpu/simd.h"

namespace gsrender {
namespace {

using cpu::kPer32;
using cpu::Vec32;

// min and max of p[0, n) (finite values).
template <typename T>
void range_of(const T* p, int64_t n, T& lo, T& hi) {
  Vec32<T> vlo = Vec32<T>{} + lo, vhi = Vec32<T>{} + hi, x;
  int64_t i = 0;
  for (; i + kPer32<T> <= n; i += kPer32<T>) {
    std::memcpy(&x, p + i, sizeof(x));
    vlo = x < vlo ? x : vlo;
    vhi = x > vhi ? x : vhi;
  }
  for (int l = 0; l < kPer32<T>; ++l) lo = std::min(lo, vlo[l]), hi = std::max(hi, vhi[l]);
  for (; i < n; ++i) lo = std::min(lo, p[i]), hi = std::max(hi, p[i]);
}

// The least |q|² of quaternions q[0, n) (rows of 4: 2 a vector in float, 1 in double).
template <typename T>
T least_norm2(const T* q, int64_t n) {
  constexpr int kQuats = kPer32<T> / 4;
  Vec32<T> lo = Vec32<T>{} + std::numeric_limits<T>::infinity(), x;
  int64_t i = 0;
  for (; i + kQuats <= n; i += kQuats) {
    std::memcpy(&x, q + 4 * i, sizeof(x));
    x *= x;  // each quaternion's four squares summed into each of its lanes:
    if constexpr (kQuats == 2) {
      x += __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6);
      x += __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5);
    } else {
      x += __builtin_shufflevector(x, x, 1, 0, 3, 2);
      x += __builtin_shufflevector(x, x, 2, 3, 0, 1);
    }
    lo = x < lo ? x : lo;
  }
  T least = std::numeric_limits<T>::infinity();
  for (int l = 0; l < kPer32<T>; ++l) least = std::min(least, lo[l]);
  for (; i < n; ++i) {
    const T* r = q + 4 * i;
    least = std::min(least, (r[0] * r[0] + r[1] * r[1]) + (r[2] * r[2] + r[3] * r[3]));
  }
  return least;
}

// The faults of Gaussians [n0, n1).
template <typename T>
uint32_t block_faults(const T* mp, const T* qp, const T* sp, const T* op, int64_t n0, int64_t n1) {
  const int64_t m = n1 - n0;
  const uint32_t f = (cpu::any_nonfinite(mp + 3 * n0, 3 * m) ? kMeansNonFinite : 0) |
                     (cpu::any_nonfinite(qp + 4 * n0, 4 * m) ? kQuatsNonFinite : 0) |
                     (cpu::any_nonfinite(sp + 3 * n0, 3 * m) ? kScalesNonFinite : 0) |
                     (cpu::any_nonfinite(op + n0, m) ? kOpacitiesNonFinite : 0);
  if (f) return f;  // (the ranges are only read of finite values)
  constexpr T kInf = std::numeric_limits<T>::infinity();
  T s_lo = kInf, s_hi = -kInf, o_lo = kInf, o_hi = -kInf;
  range_of(sp + 3 * n0, 3 * m, s_lo, s_hi);
  range_of(op + n0, m, o_lo, o_hi);
  // |q| < 1e-12 (render.py's bound) as |q|² < 1e-24
  return (s_lo <= T(0) ? kScalesNotPositive : 0) |
         (least_norm2(qp + 4 * n0, m) < T(1e-24) ? kQuatZero : 0) |
         (o_lo < T(0) || o_hi > T(1) ? kOpacityOutside : 0);
}

}  // namespace

uint32_t gaussian_faults(const at::Tensor& means, const at::Tensor& quats, const at::Tensor& scales,
                         const at::Tensor& opacities) {
  const at::Tensor m = means.contiguous(), q = quats.contiguous(), s = scales.contiguous(),
                   o = opacities.contiguous();
  const int64_t N = m.size(0);
  std::atomic<uint32_t> faults{0};
  AT_DISPATCH_FLOATING_TYPES(m.scalar_type(), "gaussian_faults", [&] {
    using T = scalar_t;
    const T *mp = m.data_ptr<T>(), *qp = q.data_ptr<T>(), *sp = s.data_ptr<T>(),
            *op = o.data_ptr<T>();
    cpu::parallel_for(0, N, 4096, [&](int64_t begin, int64_t end) {
      uint32_t f = 0;
      for (int64_t b0 = begin; b0 < end; b0 += 1024)
        f |= block_faults(mp, qp, sp, op, b0, std::min(end, b0 + 1024));
      faults.fetch_or(f, std::memory_order_relaxed);
    });
  });
  return faults.load();
}

}  // namespace gsrender
