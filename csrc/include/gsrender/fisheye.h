// The equidistant fisheye lens (OpenCV's fisheye model without distortion, gsplat's "fisheye"):
// a camera-space point p = (x, y, z) maps to u = fx·s·x + cx, v = fy·s·y + cy with
// s = θ/r, r = |(x, y)|, θ = atan2(r, z). Its 2×3 Jacobian is EWA's J (full: the x and y columns
// mix), and the vector-Jacobian product of J's entries w.r.t. p is the backward's second-order
// term. Scalar float / double only (the CPU runs it per Gaussian, not on lanes).
#pragma once

#include "gsrender/camera.h"
#include "gsrender/common.h"
#include "gsrender/math.h"

namespace gsrender {

GSR_HOST_DEVICE float gsr_atan2(float y, float x) { return atan2f(y, x); }
GSR_HOST_DEVICE double gsr_atan2(double y, double x) { return atan2(y, x); }

// A dense 2×3 Jacobian: rows (u, v), columns (x, y, z).
template <typename T>
struct Jac23 {
  T m[2][3];
};

// Below this u = r²/z² (about 11° off axis) the radial functions come from their Taylor series:
// the closed forms cancel there (q and w are differences of nearly equal terms over r² and r⁴).
// Nine terms leave a truncation error below 1e-11 relative at the switch.
constexpr double kFisheyeSeriesMax = 0.04;

// The radial functions of the map at p, with ρ² = r² + z²:
//   s = θ/r,   q = (∂s/∂r)/r,   w = (∂q/∂r)/r,
// and the derivatives ∂s/∂z = −1/ρ², ∂q/∂z = 2/ρ⁴ (closed forms without cancellation).
template <typename T>
struct FisheyeRadial {
  T s, q, w, inv_rho2;
};

template <typename T>
GSR_HOST_DEVICE FisheyeRadial<T> fisheye_radial(const Vec3<T>& p) {
  const T r2 = p.x * p.x + p.y * p.y;
  FisheyeRadial<T> f;
  f.inv_rho2 = T(1) / (r2 + p.z * p.z);
  const T u = r2 / (p.z * p.z);
  if (p.z > T(0) && u < T(kFisheyeSeriesMax)) {
    // With t = r/z: s = atan(t)/(t·z) = h(u)/z, q = g(u)/z³, w = 2·g'(u)/z⁵, where
    // h(u) = Σ (−1)^m u^m/(2m+1), g(u) = Σ (−1)^(m+1)·2(m+1)/(2m+3)·u^m, both Horner-summed.
    T h = T(0), g = T(0), dg = T(0);
    for (int m = 8; m >= 0; --m) {
      const T sign = (m & 1) ? T(-1) : T(1);
      h = h * u + sign / T(2 * m + 1);
      g = g * u - sign * T(2 * (m + 1)) / T(2 * m + 3);
      dg = dg * u + sign * T(2 * (m + 1) * (m + 2)) / T(2 * m + 5);
    }
    const T iz = T(1) / p.z;
    const T iz3 = iz * iz * iz;
    f.s = h * iz;
    f.q = g * iz3;
    f.w = T(2) * dg * iz3 * iz * iz;
  } else {
    const T r = gsr_sqrt(r2);
    f.s = gsr_atan2(r, p.z) / r;
    f.q = (p.z * f.inv_rho2 - f.s) / r2;
    f.w = -(T(2) * p.z * f.inv_rho2 * f.inv_rho2 + T(3) * f.q) / r2;
  }
  return f;
}

template <typename T>
struct FisheyeJacobian {
  Jac23<T> J;
  FisheyeRadial<T> f;
};

// ∂(u, v)/∂p: u/fx = s·x, so ∂u/∂x = fx(s + x²q), ∂u/∂y = fx·xy·q, ∂u/∂z = −fx·x/ρ² (and v alike).
template <typename T>
GSR_HOST_DEVICE FisheyeJacobian<T> fisheye_jacobian(const Vec3<T>& p, const Camera<T>& cam) {
  FisheyeJacobian<T> F;
  F.f = fisheye_radial(p);
  const T s = F.f.s, q = F.f.q, i2 = F.f.inv_rho2;
  const T xyq = p.x * p.y * q;
  F.J.m[0][0] = cam.fx * (s + p.x * p.x * q);
  F.J.m[0][1] = cam.fx * xyq;
  F.J.m[0][2] = -cam.fx * p.x * i2;
  F.J.m[1][0] = cam.fy * xyq;
  F.J.m[1][1] = cam.fy * (s + p.y * p.y * q);
  F.J.m[1][2] = -cam.fy * p.y * i2;
  return F;
}

template <typename T>
GSR_HOST_DEVICE Vec2<T> fisheye_mean2d(const Vec3<T>& p, const Camera<T>& cam,
                                       const FisheyeRadial<T>& f) {
  return {cam.fx * f.s * p.x + cam.cx, cam.fy * f.s * p.y + cam.cy};
}

// Σ_(i,j) v_J[i][j]·∂J[i][j]/∂p, from ∂s/∂x = x·q, ∂q/∂x = x·w (y alike), ∂s/∂z = −1/ρ²,
// ∂q/∂z = 2/ρ⁴, ∂(1/ρ²)/∂p = −2p/ρ⁴. J[0][1] and J[1][0] share one derivative up to fx, fy.
template <typename T>
GSR_HOST_DEVICE Vec3<T> fisheye_jacobian_vjp(const Vec3<T>& p, const Camera<T>& cam,
                                             const FisheyeRadial<T>& f, const Jac23<T>& v_J) {
  const T x = p.x, y = p.y, z = p.z, q = f.q, w = f.w, i2 = f.inv_rho2;
  const T i4 = i2 * i2;
  const T A = cam.fx * v_J.m[0][0];
  const T B = cam.fx * v_J.m[0][1] + cam.fy * v_J.m[1][0];
  const T Cz = cam.fx * v_J.m[0][2];
  const T D = cam.fy * v_J.m[1][1];
  const T E = cam.fy * v_J.m[1][2];
  const T d_xx = T(2) * x * x * i4 - i2;  // ∂(−x/ρ²)/∂x, also ∂(s + x²q)/∂z
  const T d_yy = T(2) * y * y * i4 - i2;
  const T d_xy = T(2) * x * y * i4;  // ∂(−x/ρ²)/∂y = ∂(−y/ρ²)/∂x = ∂(xy·q)/∂z
  Vec3<T> v;
  v.x = A * (T(3) * x * q + x * x * x * w) + B * (y * q + x * x * y * w) +
        D * (x * q + x * y * y * w) + Cz * d_xx + E * d_xy;
  v.y = A * (y * q + x * x * y * w) + B * (x * q + x * y * y * w) +
        D * (T(3) * y * q + y * y * y * w) + Cz * d_xy + E * d_yy;
  v.z = A * d_xx + B * d_xy + D * d_yy + T(2) * z * i4 * (Cz * x + E * y);
  return v;
}

}  // namespace gsrender
