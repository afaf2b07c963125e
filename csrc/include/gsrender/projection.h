// EWA projection of ONE Gaussian into ONE camera, forward and backward (vector-Jacobian
// products), as GSR_HOST_DEVICE functions so the CPU and CUDA backends run the same formulas.
// The rule is docs/design.md §3 ("Projection"); it matches gsplat's fully_fused_projection plus
// opacity-aware radii, for each of gsplat's pinhole, ortho and fisheye camera models
// (docs/cameras.md): only the lens map and its Jacobian J differ between them.
#pragma once

#include <cstdint>

#include "gsrender/alpha.h"
#include "gsrender/camera.h"
#include "gsrender/common.h"
#include "gsrender/fisheye.h"
#include "gsrender/math.h"

namespace gsrender {

// ---------------------------------------------------------------------------------------------
// Forward pieces
// ---------------------------------------------------------------------------------------------

template <typename T>
GSR_HOST_DEVICE Vec4<T> normalize_quat(const Vec4<T>& q) {
  const T inv = T(1) / gsr_sqrt(q.w * q.w + q.x * q.x + q.y * q.y + q.z * q.z);
  return {q.w * inv, q.x * inv, q.y * inv, q.z * inv};
}

// Rotation matrix of a unit quaternion (w, x, y, z).
template <typename T>
GSR_HOST_DEVICE Mat3<T> quat_to_rotmat(const Vec4<T>& q) {
  const T w = q.w, x = q.x, y = q.y, z = q.z;
  Mat3<T> r;
  r.m[0][0] = T(1) - T(2) * (y * y + z * z);
  r.m[0][1] = T(2) * (x * y - w * z);
  r.m[0][2] = T(2) * (x * z + w * y);
  r.m[1][0] = T(2) * (x * y + w * z);
  r.m[1][1] = T(1) - T(2) * (x * x + z * z);
  r.m[1][2] = T(2) * (y * z - w * x);
  r.m[2][0] = T(2) * (x * z - w * y);
  r.m[2][1] = T(2) * (y * z + w * x);
  r.m[2][2] = T(1) - T(2) * (x * x + y * y);
  return r;
}

// M = R_q · diag(s); Σ = M Mᵀ.
template <typename T>
GSR_HOST_DEVICE Mat3<T> scale_columns(const Mat3<T>& rq, const Vec3<T>& s) {
  Mat3<T> m;
  for (int i = 0; i < 3; ++i) {
    m.m[i][0] = rq.m[i][0] * s.x;
    m.m[i][1] = rq.m[i][1] * s.y;
    m.m[i][2] = rq.m[i][2] * s.z;
  }
  return m;
}

// The local affine approximation J of the perspective map at the camera-space mean p. x/z and
// y/z are clamped to the image extent plus 0.3·tan(fov/2) on each side, so Gaussians far
// outside the view do not get absurdly stretched footprints.
template <typename T>
struct EwaJacobian {
  T j00, j02, j11, j12;  // J = [[j00, 0, j02], [0, j11, j12]]
  T tx, ty;              // the (possibly clamped) x and y used in j02, j12
  decltype(T() < T()) clamped_x, clamped_y;  // bool (a lane mask for the CPU's cpu::LaneF)
};

template <typename T>
GSR_HOST_DEVICE EwaJacobian<T> ewa_jacobian(const Vec3<T>& p, const Camera<T>& cam) {
  const T lim_x_pos = cam.lim_x_pos, lim_x_neg = cam.lim_x_neg;
  const T lim_y_pos = cam.lim_y_pos, lim_y_neg = cam.lim_y_neg;
  const T rz = T(1) / p.z;
  const T u = p.x * rz, v = p.y * rz;
  EwaJacobian<T> J;
  J.clamped_x = u < -lim_x_neg || u > lim_x_pos;
  J.clamped_y = v < -lim_y_neg || v > lim_y_pos;
  J.tx = p.z * gsr_min(lim_x_pos, gsr_max(-lim_x_neg, u));
  J.ty = p.z * gsr_min(lim_y_pos, gsr_max(-lim_y_neg, v));
  J.j00 = cam.fx * rz;
  J.j11 = cam.fy * rz;
  J.j02 = -cam.fx * J.tx * rz * rz;
  J.j12 = -cam.fy * J.ty * rz * rz;
  return J;
}

// The orthographic map u = fx·x + cx, v = fy·y + cy: a constant J = [[fx, 0, 0], [0, fy, 0]].
template <typename T>
GSR_HOST_DEVICE EwaJacobian<T> ortho_jacobian(const Camera<T>& cam) {
  EwaJacobian<T> J;
  J.j00 = cam.fx, J.j11 = cam.fy, J.j02 = T(0), J.j12 = T(0);
  J.tx = T(0), J.ty = T(0);
  J.clamped_x = false, J.clamped_y = false;
  return J;
}

// A symmetric 2×2 matrix [[a, b], [b, c]].
template <typename T>
struct Sym2 {
  T a, b, c;
};

// cov2d = J Σc Jᵀ, using the sparsity of J.
template <typename T>
GSR_HOST_DEVICE Sym2<T> project_cov(const EwaJacobian<T>& J, const Mat3<T>& S) {
  const T(&s)[3][3] = S.m;
  Sym2<T> r;
  r.a = J.j00 * J.j00 * s[0][0] + T(2) * J.j00 * J.j02 * s[0][2] + J.j02 * J.j02 * s[2][2];
  r.b = J.j00 * J.j11 * s[0][1] + J.j00 * J.j12 * s[0][2] + J.j02 * J.j11 * s[1][2] +
        J.j02 * J.j12 * s[2][2];
  r.c = J.j11 * J.j11 * s[1][1] + T(2) * J.j11 * J.j12 * s[1][2] + J.j12 * J.j12 * s[2][2];
  return r;
}

// cov = J S Jᵀ for a dense J.
template <typename T>
GSR_HOST_DEVICE Sym2<T> project_cov(const Jac23<T>& J, const Mat3<T>& S) {
  const Vec3<T> j0 = {J.m[0][0], J.m[0][1], J.m[0][2]};
  const Vec3<T> j1 = {J.m[1][0], J.m[1][1], J.m[1][2]};
  const Vec3<T> s0 = S * j0, s1 = S * j1;
  return {dot(j0, s0), dot(j0, s1), dot(j1, s1)};
}

// Radii are stored as int32; larger footprints are capped here.
template <typename T>
GSR_HOST_DEVICE T kMaxRadius() {
  return T(1 << 30);
}

template <typename T>
struct Projected {
  bool visible;
  int radius_x, radius_y;
  Vec2<T> mean2d;
  T depth;
  Sym2<T> conic;  // stored as (a, b, c) = inverse(cov2d) entries (xx, xy, yy)
  T opacity2d;
};

template <typename T>
GSR_HOST_DEVICE Projected<T> projected_culled() {
  Projected<T> r;
  r.visible = false;
  r.radius_x = 0;
  r.radius_y = 0;
  r.mean2d = {T(0), T(0)};
  r.depth = T(0);
  r.conic = {T(0), T(0), T(0)};
  r.opacity2d = T(0);
  return r;
}

// The lens model's J at the camera-space mean p (EWA's local affine map): the clamped perspective
// J for pinhole, the constant one for ortho, the full 2×3 one for fisheye.
template <int Model, typename T>
GSR_HOST_DEVICE auto lens_jacobian(const Vec3<T>& p, const Camera<T>& cam) {
  if constexpr (Model == kPinhole) {
    return ewa_jacobian(p, cam);
  } else if constexpr (Model == kOrtho) {
    return ortho_jacobian(cam);
  } else {
    return fisheye_jacobian(p, cam);
  }
}

// The pixel position of the camera-space mean p (J: lens_jacobian<Model>'s result).
template <int Model, typename T, typename Jacobian>
GSR_HOST_DEVICE Vec2<T> lens_mean2d(const Vec3<T>& p, const Camera<T>& cam, const Jacobian& J) {
  if constexpr (Model == kPinhole) {
    const T rz = T(1) / p.z;
    return {cam.fx * p.x * rz + cam.cx, cam.fy * p.y * rz + cam.cy};
  } else if constexpr (Model == kOrtho) {
    return {cam.fx * p.x + cam.cx, cam.fy * p.y + cam.cy};
  } else {
    return fisheye_mean2d(p, cam, J.f);
  }
}

// J Σc Jᵀ for lens_jacobian<Model>'s J.
template <int Model, typename T, typename Jacobian>
GSR_HOST_DEVICE Sym2<T> lens_cov(const Jacobian& J, const Mat3<T>& cov_c) {
  if constexpr (Model == kFisheye) {
    return project_cov(J.J, cov_c);
  } else {
    return project_cov(J, cov_c);
  }
}

// The whole projection rule for one Gaussian × one camera with the lens Model (a CameraModel).
// Culled → radii 0, everything else 0.
template <int Model, typename T>
GSR_HOST_DEVICE Projected<T> project_gaussian(const Vec3<T>& mean, const Vec4<T>& quat,
                                              const Vec3<T>& scale, T opacity,
                                              const Camera<T>& cam, T eps2d, T near_plane,
                                              T far_plane, T radius_clip, bool antialiased) {
  const Vec3<T> p = cam.R * mean + cam.t;  // camera-space mean
  if (!(p.z >= near_plane && p.z <= far_plane)) return projected_culled<T>();

  const Mat3<T> M = scale_columns(quat_to_rotmat(normalize_quat(quat)), scale);
  const Mat3<T> cov_c = cam.R * (M * transpose(M)) * transpose(cam.R);  // [3,3] camera space
  const auto J = lens_jacobian<Model>(p, cam);
  Sym2<T> cov = lens_cov<Model>(J, cov_c);

  const T det_orig = cov.a * cov.c - cov.b * cov.b;
  cov.a += eps2d;
  cov.c += eps2d;
  const T det = cov.a * cov.c - cov.b * cov.b;
  if (!(det > T(0))) return projected_culled<T>();

  T opacity2d = opacity;
  if (antialiased) opacity2d *= gsr_sqrt(gsr_max(T(0), det_orig / det));
  // Opacity-aware support: α = o·exp(−σ) ≥ 1/255 needs σ ≤ ln(255·o), σ = ½ Mahalanobis².
  if (!(opacity2d >= T(kAlphaMin))) return projected_culled<T>();  // (NaN culled too)
  // (clamped inside, so rounding at o2d ≈ 1/255 cannot give sqrt of a negative)
  const T k = support_radius_factor(opacity2d);
  const T rx = gsr_ceil(k * gsr_sqrt(cov.a));
  const T ry = gsr_ceil(k * gsr_sqrt(cov.c));
  if (rx <= radius_clip && ry <= radius_clip) return projected_culled<T>();

  const Vec2<T> mean2d = lens_mean2d<Model>(p, cam, J);
  if (mean2d.x + rx <= T(0) || mean2d.x - rx >= cam.width || mean2d.y + ry <= T(0) ||
      mean2d.y - ry >= cam.height)
    return projected_culled<T>();

  Projected<T> r;
  r.visible = true;
  // The cap only keeps the int conversion defined for absurd footprints (and NaN inputs).
  r.radius_x = static_cast<int>(gsr_min(rx, kMaxRadius<T>()));
  r.radius_y = static_cast<int>(gsr_min(ry, kMaxRadius<T>()));
  r.mean2d = mean2d;
  r.depth = p.z;
  const T inv_det = T(1) / det;
  r.conic = {cov.c * inv_det, -cov.b * inv_det, cov.a * inv_det};
  r.opacity2d = opacity2d;
  return r;
}

// Writes r as entry idx of project_fwd's outputs: radii [.., 2], means2d [.., 2], depths,
// conics [.., 3], opacities2d.
template <typename T>
GSR_HOST_DEVICE void store_projected(const Projected<T>& r, int64_t idx, int32_t* radii,
                                     T* means2d, T* depths, T* conics, T* opacities2d) {
  radii[2 * idx] = r.radius_x;
  radii[2 * idx + 1] = r.radius_y;
  means2d[2 * idx] = r.mean2d.x;
  means2d[2 * idx + 1] = r.mean2d.y;
  depths[idx] = r.depth;
  conics[3 * idx] = r.conic.a;
  conics[3 * idx + 1] = r.conic.b;
  conics[3 * idx + 2] = r.conic.c;
  opacities2d[idx] = r.opacity2d;
}

// ---------------------------------------------------------------------------------------------
// Backward pieces (vector-Jacobian products). Each takes the forward inputs and the gradient of
// the output, and returns the gradient of the inputs.
// ---------------------------------------------------------------------------------------------

// conic = inverse(cov) as (X00, X01, X11): v_cov = −X V X with V = [[v0, v1/2], [v1/2, v2]];
// the off-diagonal output counts both symmetric entries, hence the factor 2 on v_cov.b.
template <typename T>
GSR_HOST_DEVICE Sym2<T> inverse_vjp(const Sym2<T>& X, const Sym2<T>& v) {
  Sym2<T> r;
  r.a = -(v.a * X.a * X.a + v.b * X.a * X.b + v.c * X.b * X.b);
  r.b = -(T(2) * v.a * X.a * X.b + v.b * (X.a * X.c + X.b * X.b) + T(2) * v.c * X.b * X.c);
  r.c = -(v.a * X.b * X.b + v.b * X.b * X.c + v.c * X.c * X.c);
  return r;
}

// cov = J S Jᵀ. With G = [[g.a, g.b/2], [g.b/2, g.c]]: v_S = Jᵀ G J and v_J = 2 G J S
// (S symmetric). Only the four structurally non-zero entries of v_J are returned.
template <typename T>
struct JacobianGrad {
  T j00, j02, j11, j12;
};

template <typename T>
GSR_HOST_DEVICE void project_cov_vjp(const EwaJacobian<T>& J, const Mat3<T>& S, const Sym2<T>& g,
                                     Mat3<T>& v_S, JacobianGrad<T>& v_J) {
  const Vec3<T> r0 = {J.j00, T(0), J.j02};
  const Vec3<T> r1 = {T(0), J.j11, J.j12};
  const T h = T(0.5) * g.b;
  v_S = g.a * outer(r0, r0) + h * (outer(r0, r1) + outer(r1, r0)) + g.c * outer(r1, r1);
  // Rows of G J, then times S (S symmetric, so row·S = S·row).
  const Vec3<T> gj0 = g.a * r0 + h * r1;
  const Vec3<T> gj1 = h * r0 + g.c * r1;
  const Vec3<T> q0 = S * gj0;
  const Vec3<T> q1 = S * gj1;
  v_J.j00 = T(2) * q0.x;
  v_J.j02 = T(2) * q0.z;
  v_J.j11 = T(2) * q1.y;
  v_J.j12 = T(2) * q1.z;
}

// The dense J's: with G = [[g.a, g.b/2], [g.b/2, g.c]], v_S = Jᵀ G J and
// v_J = 2 G J S (S symmetric).
template <typename T>
GSR_HOST_DEVICE void project_cov_vjp(const Jac23<T>& J, const Mat3<T>& S, const Sym2<T>& g,
                                     Mat3<T>& v_S, Jac23<T>& v_J) {
  const Vec3<T> r0 = {J.m[0][0], J.m[0][1], J.m[0][2]};
  const Vec3<T> r1 = {J.m[1][0], J.m[1][1], J.m[1][2]};
  const T h = T(0.5) * g.b;
  v_S = g.a * outer(r0, r0) + h * (outer(r0, r1) + outer(r1, r0)) + g.c * outer(r1, r1);
  const Vec3<T> q0 = S * (g.a * r0 + h * r1);
  const Vec3<T> q1 = S * (h * r0 + g.c * r1);
  v_J.m[0][0] = T(2) * q0.x, v_J.m[0][1] = T(2) * q0.y, v_J.m[0][2] = T(2) * q0.z;
  v_J.m[1][0] = T(2) * q1.x, v_J.m[1][1] = T(2) * q1.y, v_J.m[1][2] = T(2) * q1.z;
}

// Gradient of the EWA Jacobian entries w.r.t. the camera-space mean. A clamped tx = z·lim makes
// j02 = −fx·lim/z independent of x. (Selects, not branches: the CPU runs it on lane types.)
template <typename T>
GSR_HOST_DEVICE Vec3<T> ewa_jacobian_vjp(const Vec3<T>& p, const Camera<T>& cam,
                                         const EwaJacobian<T>& J, const JacobianGrad<T>& v_J) {
  const T rz = T(1) / p.z;
  const T rz2 = rz * rz;
  const T rz3 = rz2 * rz;
  Vec3<T> v_p = {T(0), T(0), T(0)};
  v_p.z -= (cam.fx * v_J.j00 + cam.fy * v_J.j11) * rz2;
  v_p.x -= gsr_select(J.clamped_x, T(0), cam.fx * rz2 * v_J.j02);
  v_p.z += gsr_select(J.clamped_x, cam.fx * J.tx * rz3 * v_J.j02,
                      T(2) * cam.fx * J.tx * rz3 * v_J.j02);
  v_p.y -= gsr_select(J.clamped_y, T(0), cam.fy * rz2 * v_J.j12);
  v_p.z += gsr_select(J.clamped_y, cam.fy * J.ty * rz3 * v_J.j12,
                      T(2) * cam.fy * J.ty * rz3 * v_J.j12);
  return v_p;
}

// Gradient of quat_to_rotmat w.r.t. the (unit) quaternion it was given.
template <typename T>
GSR_HOST_DEVICE Vec4<T> quat_to_rotmat_vjp(const Vec4<T>& q, const Mat3<T>& v_R) {
  const T w = q.w, x = q.x, y = q.y, z = q.z;
  const T(&g)[3][3] = v_R.m;
  Vec4<T> r;
  r.w = T(2) * (-z * g[0][1] + y * g[0][2] + z * g[1][0] - x * g[1][2] - y * g[2][0] +
                x * g[2][1]);
  r.x = T(2) * (y * g[0][1] + z * g[0][2] + y * g[1][0] - T(2) * x * g[1][1] - w * g[1][2] +
                z * g[2][0] + w * g[2][1] - T(2) * x * g[2][2]);
  r.y = T(2) * (-T(2) * y * g[0][0] + x * g[0][1] + w * g[0][2] + x * g[1][0] + z * g[1][2] -
                w * g[2][0] + z * g[2][1] - T(2) * y * g[2][2]);
  r.z = T(2) * (-T(2) * z * g[0][0] - w * g[0][1] + x * g[0][2] + w * g[1][0] -
                T(2) * z * g[1][1] + y * g[1][2] + x * g[2][0] + y * g[2][1]);
  return r;
}

// q̂ = q/|q|: v_q = (v_q̂ − q̂ (q̂·v_q̂)) / |q|.
template <typename T>
GSR_HOST_DEVICE Vec4<T> normalize_quat_vjp(const Vec4<T>& q, const Vec4<T>& v_qn) {
  const T inv = T(1) / gsr_sqrt(q.w * q.w + q.x * q.x + q.y * q.y + q.z * q.z);
  const Vec4<T> qn = {q.w * inv, q.x * inv, q.y * inv, q.z * inv};
  const T d = qn.w * v_qn.w + qn.x * v_qn.x + qn.y * v_qn.y + qn.z * v_qn.z;
  return {(v_qn.w - qn.w * d) * inv, (v_qn.x - qn.x * d) * inv, (v_qn.y - qn.y * d) * inv,
          (v_qn.z - qn.z * d) * inv};
}

template <typename T>
struct ProjectGrads {
  Vec3<T> v_mean;
  Vec4<T> v_quat;  // w.r.t. the unnormalised input quaternion
  Vec3<T> v_scale;
  T v_opacity;
  Mat3<T> v_R;  // w.r.t. viewmat[:3,:3]
  Vec3<T> v_t;  // w.r.t. viewmat[:3,3]
};

// The lens step's backward: given v_cov (of J Σc Jᵀ), v_mean2d and v_depth, sets v_cov_c and
// returns the gradient of the camera-space mean p (through mean2d, depth and J's dependence on p).
template <int Model, typename T, typename Jacobian>
GSR_HOST_DEVICE Vec3<T> lens_vjp(const Vec3<T>& p, const Camera<T>& cam, const Jacobian& J,
                                 const Mat3<T>& cov_c, const Sym2<T>& v_cov,
                                 const Vec2<T>& v_mean2d, T v_depth, Mat3<T>& v_cov_c) {
  if constexpr (Model == kPinhole) {
    JacobianGrad<T> v_J;
    project_cov_vjp(J, cov_c, v_cov, v_cov_c, v_J);
    const T rz = T(1) / p.z;
    Vec3<T> v_p = ewa_jacobian_vjp(p, cam, J, v_J);
    v_p.x += cam.fx * rz * v_mean2d.x;
    v_p.y += cam.fy * rz * v_mean2d.y;
    v_p.z += v_depth - (cam.fx * p.x * v_mean2d.x + cam.fy * p.y * v_mean2d.y) * rz * rz;
    return v_p;
  } else if constexpr (Model == kOrtho) {
    JacobianGrad<T> v_J;  // J is constant: no gradient to p
    project_cov_vjp(J, cov_c, v_cov, v_cov_c, v_J);
    return {cam.fx * v_mean2d.x, cam.fy * v_mean2d.y, v_depth};
  } else {
    Jac23<T> v_J;
    project_cov_vjp(J.J, cov_c, v_cov, v_cov_c, v_J);
    Vec3<T> v_p = fisheye_jacobian_vjp(p, cam, J.f, v_J);
    // mean2d's own Jacobian is J (fisheye does not clamp)
    v_p.x += J.J.m[0][0] * v_mean2d.x + J.J.m[1][0] * v_mean2d.y;
    v_p.y += J.J.m[0][1] * v_mean2d.x + J.J.m[1][1] * v_mean2d.y;
    v_p.z += J.J.m[0][2] * v_mean2d.x + J.J.m[1][2] * v_mean2d.y + v_depth;
    return v_p;
  }
}

// Backward of project_gaussian<Model> for a Gaussian that was visible (the caller skips culled
// ones: they have zero gradient). v_conic uses the same (a, b, c) layout as the forward output.
template <int Model, typename T>
GSR_HOST_DEVICE ProjectGrads<T> project_gaussian_bwd(const Vec3<T>& mean, const Vec4<T>& quat,
                                                     const Vec3<T>& scale, T opacity,
                                                     const Camera<T>& cam, T eps2d,
                                                     bool antialiased, const Vec2<T>& v_mean2d,
                                                     T v_depth, const Sym2<T>& v_conic,
                                                     T v_opacity2d) {
  // Recompute the forward intermediates.
  const Vec3<T> p = cam.R * mean + cam.t;
  const Vec4<T> qn = normalize_quat(quat);
  const Mat3<T> rq = quat_to_rotmat(qn);
  const Mat3<T> M = scale_columns(rq, scale);
  const Mat3<T> sigma = M * transpose(M);
  const Mat3<T> cov_c = cam.R * sigma * transpose(cam.R);
  const auto J = lens_jacobian<Model>(p, cam);
  const Sym2<T> cov0 = lens_cov<Model>(J, cov_c);  // without eps2d
  const Sym2<T> cov = {cov0.a + eps2d, cov0.b, cov0.c + eps2d};
  const T det_orig = cov0.a * cov0.c - cov0.b * cov0.b;
  const T det = cov.a * cov.c - cov.b * cov.b;
  const T inv_det = T(1) / det;
  const Sym2<T> conic = {cov.c * inv_det, -cov.b * inv_det, cov.a * inv_det};

  ProjectGrads<T> g;

  // opacities2d = opacity · compensation, compensation = sqrt(det_orig / det).
  Sym2<T> v_cov = inverse_vjp(conic, v_conic);
  if (antialiased) {
    const T ratio = gsr_max(T(0), det_orig / det);
    const T comp = gsr_sqrt(ratio);
    g.v_opacity = v_opacity2d * comp;
    // only where comp > 0 (at 0 its derivative is unbounded: no gradient to the covariance)
    const auto live = comp > T(0);
    const T v_ratio = v_opacity2d * opacity * T(0.5) / comp;
    const T v_det_orig = v_ratio * inv_det;
    const T v_det = -v_ratio * ratio * inv_det;
    // det_orig = a0 c0 − b², det = (a0+eps)(c0+eps) − b²; both depend on (a0, b, c0).
    v_cov.a = gsr_select(live, v_cov.a + (v_det_orig * cov0.c + v_det * cov.c), v_cov.a);
    v_cov.c = gsr_select(live, v_cov.c + (v_det_orig * cov0.a + v_det * cov.a), v_cov.c);
    v_cov.b = gsr_select(live, v_cov.b - T(2) * cov.b * (v_det_orig + v_det), v_cov.b);
  } else {
    g.v_opacity = v_opacity2d;
  }

  // cov = J Σc Jᵀ; the camera-space mean from means2d, depth and J
  Mat3<T> v_cov_c;
  const Vec3<T> v_p = lens_vjp<Model>(p, cam, J, cov_c, v_cov, v_mean2d, v_depth, v_cov_c);

  // Σc = R Σ Rᵀ (both symmetric): v_Σ = Rᵀ v_Σc R, v_R = 2 v_Σc R Σ.
  const Mat3<T> v_sigma = transpose(cam.R) * v_cov_c * cam.R;
  // p = R·mean + t
  g.v_mean = mul_transposed(cam.R, v_p);
  g.v_t = v_p;
  g.v_R = T(2) * (v_cov_c * cam.R * sigma) + outer(v_p, mean);

  // Σ = M Mᵀ: v_M = 2 v_Σ M; M = R_q diag(s).
  const Mat3<T> v_M = T(2) * (v_sigma * M);
  const T sv[3] = {scale.x, scale.y, scale.z};
  T vs[3] = {T(0), T(0), T(0)};
  Mat3<T> v_rq;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      v_rq.m[i][j] = v_M.m[i][j] * sv[j];
      vs[j] += v_M.m[i][j] * rq.m[i][j];
    }
  g.v_scale = {vs[0], vs[1], vs[2]};
  g.v_quat = normalize_quat_vjp(quat, quat_to_rotmat_vjp(qn, v_rq));
  return g;
}

}  // namespace gsrender
