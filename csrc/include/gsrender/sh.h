// Real spherical harmonics of degree 0..3 with the 3DGS basis and constants, for ONE Gaussian
// seen along ONE direction: forward and backward, shared by the CPU and CUDA backends.
// colour = Σ_k basis_k(normalize(dir)) · coeffs[k]  (no +0.5 offset and no clamp here).
#pragma once

#include "gsrender/common.h"
#include "gsrender/math.h"

namespace gsrender {

constexpr int kMaxShDegree = 3;
constexpr int kMaxShBases = (kMaxShDegree + 1) * (kMaxShDegree + 1);

GSR_HOST_DEVICE int sh_num_bases(int degree) { return (degree + 1) * (degree + 1); }

// The 3DGS constants (utils/sh_utils.py of the original code). Scalars, not arrays, so device
// code may use them directly.
constexpr double kShC0 = 0.28209479177387814;
constexpr double kShC1 = 0.4886025119029199;
constexpr double kShC2_0 = 1.0925484305920792;
constexpr double kShC2_1 = -1.0925484305920792;
constexpr double kShC2_2 = 0.31539156525252005;
constexpr double kShC2_3 = -1.0925484305920792;
constexpr double kShC2_4 = 0.5462742152960396;
constexpr double kShC3_0 = -0.5900435899266435;
constexpr double kShC3_1 = 2.890611442640554;
constexpr double kShC3_2 = -0.4570457994644658;
constexpr double kShC3_3 = 0.3731763325901154;
constexpr double kShC3_4 = -0.4570457994644658;
constexpr double kShC3_5 = 1.445305721320277;
constexpr double kShC3_6 = -0.5900435899266435;

// Unit direction with F.normalize semantics (|d| floored at 1e-12, so a zero direction gives a
// zero vector instead of NaN). Returns 1/max(|d|, eps) in inv_norm.
template <typename T>
GSR_HOST_DEVICE Vec3<T> sh_normalize_dir(const Vec3<T>& d, T& inv_norm, bool& floored) {
  const T n = gsr_sqrt(dot(d, d));
  floored = !(n > T(1e-12));
  inv_norm = T(1) / (floored ? T(1e-12) : n);
  return inv_norm * d;
}

// basis[k] for k < (degree+1)², at the unit direction (x, y, z).
template <typename T>
GSR_HOST_DEVICE void sh_basis(int degree, const Vec3<T>& n, T* basis) {
  const T x = n.x, y = n.y, z = n.z;
  basis[0] = T(kShC0);
  if (degree < 1) return;
  basis[1] = -T(kShC1) * y;
  basis[2] = T(kShC1) * z;
  basis[3] = -T(kShC1) * x;
  if (degree < 2) return;
  const T xx = x * x, yy = y * y, zz = z * z;
  basis[4] = T(kShC2_0) * x * y;
  basis[5] = T(kShC2_1) * y * z;
  basis[6] = T(kShC2_2) * (T(2) * zz - xx - yy);
  basis[7] = T(kShC2_3) * x * z;
  basis[8] = T(kShC2_4) * (xx - yy);
  if (degree < 3) return;
  basis[9] = T(kShC3_0) * y * (T(3) * xx - yy);
  basis[10] = T(kShC3_1) * x * y * z;
  basis[11] = T(kShC3_2) * y * (T(4) * zz - xx - yy);
  basis[12] = T(kShC3_3) * z * (T(2) * zz - T(3) * xx - T(3) * yy);
  basis[13] = T(kShC3_4) * x * (T(4) * zz - xx - yy);
  basis[14] = T(kShC3_5) * z * (xx - yy);
  basis[15] = T(kShC3_6) * x * (xx - T(3) * yy);
}

// v_n += Σ_k v_basis[k] · ∂basis_k/∂n, at the unit direction n (treated as free x, y, z).
template <typename T>
GSR_HOST_DEVICE Vec3<T> sh_basis_vjp(int degree, const Vec3<T>& n, const T* v_basis) {
  const T x = n.x, y = n.y, z = n.z;
  Vec3<T> g = {T(0), T(0), T(0)};
  if (degree < 1) return g;
  g.x -= T(kShC1) * v_basis[3];
  g.y -= T(kShC1) * v_basis[1];
  g.z += T(kShC1) * v_basis[2];
  if (degree < 2) return g;
  const T xx = x * x, yy = y * y, zz = z * z;
  const T c20 = T(kShC2_0), c21 = T(kShC2_1), c22 = T(kShC2_2), c23 = T(kShC2_3),
          c24 = T(kShC2_4);
  g.x += c20 * y * v_basis[4] - T(2) * c22 * x * v_basis[6] + c23 * z * v_basis[7] +
         T(2) * c24 * x * v_basis[8];
  g.y += c20 * x * v_basis[4] + c21 * z * v_basis[5] - T(2) * c22 * y * v_basis[6] -
         T(2) * c24 * y * v_basis[8];
  g.z += c21 * y * v_basis[5] + T(4) * c22 * z * v_basis[6] + c23 * x * v_basis[7];
  if (degree < 3) return g;
  const T c30 = T(kShC3_0), c31 = T(kShC3_1), c32 = T(kShC3_2), c33 = T(kShC3_3),
          c34 = T(kShC3_4), c35 = T(kShC3_5), c36 = T(kShC3_6);
  g.x += c30 * T(6) * x * y * v_basis[9] + c31 * y * z * v_basis[10] -
         c32 * T(2) * x * y * v_basis[11] - c33 * T(6) * x * z * v_basis[12] +
         c34 * (T(4) * zz - T(3) * xx - yy) * v_basis[13] + c35 * T(2) * x * z * v_basis[14] +
         c36 * T(3) * (xx - yy) * v_basis[15];
  g.y += c30 * T(3) * (xx - yy) * v_basis[9] + c31 * x * z * v_basis[10] +
         c32 * (T(4) * zz - xx - T(3) * yy) * v_basis[11] - c33 * T(6) * y * z * v_basis[12] -
         c34 * T(2) * x * y * v_basis[13] - c35 * T(2) * y * z * v_basis[14] -
         c36 * T(6) * x * y * v_basis[15];
  g.z += c31 * x * y * v_basis[10] + c32 * T(8) * y * z * v_basis[11] +
         c33 * T(3) * (T(2) * zz - xx - yy) * v_basis[12] + c34 * T(8) * x * z * v_basis[13] +
         c35 * (xx - yy) * v_basis[14];
  return g;
}

// colour[3] = Σ_k basis_k(n) · coeffs[k*3 .. k*3+2] at the unit direction n; coeffs is one
// Gaussian's [K,3]. (With T the CPU's cpu::LaneF, 8 Gaussians in lanes, coeffs holds each of the
// [K,3] values as one LaneF.)
template <typename T>
GSR_HOST_DEVICE void sh_eval_unit(int degree, const Vec3<T>& n, const T* coeffs, T* color) {
  T basis[kMaxShBases] = {};  // fixed size and unrolled loops keep it in registers on the GPU
  sh_basis(degree, n, basis);
  T r = T(0), g = T(0), b = T(0);
  const int nb = sh_num_bases(degree);
  GSR_UNROLL
  for (int k = 0; k < kMaxShBases; ++k) {
    if (k >= nb) break;
    r += basis[k] * coeffs[3 * k + 0];
    g += basis[k] * coeffs[3 * k + 1];
    b += basis[k] * coeffs[3 * k + 2];
  }
  color[0] = r;
  color[1] = g;
  color[2] = b;
}

// colour[3] = Σ_k basis_k(normalize(dir)) · coeffs[k*3 .. k*3+2]; coeffs is one Gaussian's [K,3].
template <typename T>
GSR_HOST_DEVICE void sh_eval(int degree, const Vec3<T>& dir, const T* coeffs, T* color) {
  T inv_norm;
  bool floored;
  sh_eval_unit(degree, sh_normalize_dir(dir, inv_norm, floored), coeffs, color);
}

// Backward of sh_eval for one (camera, Gaussian); returns the gradient w.r.t. the unnormalised
// dir. If v_coeffs is given, v_coeffs[k*3+ch] += basis_k · v_color[ch] (accumulated, so both
// backends sum over cameras in place, in camera order).
template <typename T>
GSR_HOST_DEVICE Vec3<T> sh_eval_bwd(int degree, const Vec3<T>& dir, const T* coeffs,
                                    const T* v_color, T* v_coeffs) {
  T inv_norm;
  bool floored;
  const Vec3<T> n = sh_normalize_dir(dir, inv_norm, floored);
  // zero-initialised only to keep -Wmaybe-uninitialized quiet (entries >= nb are never read)
  T basis[kMaxShBases] = {};
  T v_basis[kMaxShBases] = {};
  sh_basis(degree, n, basis);
  const int nb = sh_num_bases(degree);
  GSR_UNROLL
  for (int k = 0; k < kMaxShBases; ++k) {
    if (k >= nb) break;
    v_basis[k] = coeffs[3 * k + 0] * v_color[0] + coeffs[3 * k + 1] * v_color[1] +
                 coeffs[3 * k + 2] * v_color[2];
    if (v_coeffs != nullptr) {
      v_coeffs[3 * k + 0] += basis[k] * v_color[0];
      v_coeffs[3 * k + 1] += basis[k] * v_color[1];
      v_coeffs[3 * k + 2] += basis[k] * v_color[2];
    }
  }
  const Vec3<T> v_n = sh_basis_vjp(degree, n, v_basis);
  // n = d / |d|: v_d = (v_n − n (n·v_n)) / |d|; below the floor n = d/eps is linear in d.
  if (floored) return inv_norm * v_n;
  return inv_norm * (v_n - dot(n, v_n) * n);
}

}  // namespace gsrender
