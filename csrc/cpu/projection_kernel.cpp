// project_fwd / project_bwd on the CPU, torch-free (projection.cpp, the op, checks the arguments
// and allocates what these write): the per-(camera, Gaussian) math lives in
// gsrender/projection.h; this file loops over it, 8 float Gaussians of a pinhole camera at a time.
#include "projection_kernel.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "gsrender/camera.h"
#include "gsrender/projection.h"
#include "isa.h"
#include "lane_float.h"

namespace gsrender {
namespace {

// Gaussians per backward work item: fixed (not per thread) so the viewmat reduction order, and
// hence the result, does not depend on the number of threads.
constexpr int64_t kBwdBlock = 256;

// Where project_lanes writes its 8 Gaussians' outputs (the op's arrays at the first one).
struct LaneOut {
  int32_t* radii;
  float *m2, *d, *con, *o2;
};
// One camera in every lane.
Camera<cpu::LaneF> camera_lanes(const Camera<float>& c1) {
  using cpu::LaneF;
  Camera<LaneF> cam;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) cam.R.m[i][j] = LaneF(c1.R.m[i][j]);
  cam.t = {LaneF(c1.t.x), LaneF(c1.t.y), LaneF(c1.t.z)};
  cam.fx = LaneF(c1.fx), cam.fy = LaneF(c1.fy), cam.cx = LaneF(c1.cx), cam.cy = LaneF(c1.cy);
  cam.width = LaneF(c1.width), cam.height = LaneF(c1.height);
  cam.lim_x_pos = LaneF(c1.lim_x_pos), cam.lim_x_neg = LaneF(c1.lim_x_neg);
  cam.lim_y_pos = LaneF(c1.lim_y_pos), cam.lim_y_neg = LaneF(c1.lim_y_neg);
  return cam;
}

// The parameters of 8 consecutive Gaussians, one per lane.
struct GaussianLanes {
  Vec3<cpu::LaneF> mean, scale;
  Vec4<cpu::LaneF> quat;
  cpu::LaneF opacity;
  GaussianLanes(const float* mp, const float* qp, const float* sp, const float* op) {
    cpu::LaneF m[3], s[3], q[4], o[1];
    cpu::load_lanes<3>(mp, 3, m), cpu::load_lanes<3>(sp, 3, s);
    cpu::load_lanes<4>(qp, 4, q), cpu::load_lanes<1>(op, 1, o);
    mean = {m[0], m[1], m[2]}, scale = {s[0], s[1], s[2]}, quat = {q[0], q[1], q[2], q[3]};
    opacity = o[0];
  }
};

// project_gaussian for 8 consecutive Gaussians of one camera in float, one per lane (cpu::LaneF,
// the shared projection.h templates on it): every lane runs project_gaussian's operations in its
// order, each of its culling tests is a lane mask, and culled lanes are written as
// projected_culled's zeros — the scalar's bits in every lane (tests/test_project_sh.py checks
// them under every ISA copy). The logf of the radius factor runs per lane.
void project_lanes(const float* mp, const float* qp, const float* sp, const float* op,
                   const Camera<float>& c1, float eps2d, float near_plane, float far_plane,
                   float radius_clip, bool antialiased, const LaneOut& out) {
  using cpu::LaneF;
  using cpu::LaneM;
  constexpr int L = cpu::kLanes;
  const Camera<LaneF> cam = camera_lanes(c1);
  const GaussianLanes gl(mp, qp, sp, op);
  const Vec3<LaneF>& mean = gl.mean;
  const Vec3<LaneF>& scale = gl.scale;
  const Vec4<LaneF>& quat = gl.quat;
  const LaneF opacity = gl.opacity;
  const Vec3<LaneF> p = cam.R * mean + cam.t;
  LaneM vis = (p.z >= LaneF(near_plane)) & (p.z <= LaneF(far_plane));
  const Mat3<LaneF> M = scale_columns(quat_to_rotmat(normalize_quat(quat)), scale);
  const Mat3<LaneF> cov_c = cam.R * (M * transpose(M)) * transpose(cam.R);
  const EwaJacobian<LaneF> J = ewa_jacobian(p, cam);
  Sym2<LaneF> cov = project_cov(J, cov_c);
  const LaneF det_orig = cov.a * cov.c - cov.b * cov.b;
  cov.a += LaneF(eps2d);
  cov.c += LaneF(eps2d);
  const LaneF det = cov.a * cov.c - cov.b * cov.b;
  vis = vis & (det > LaneF(0));
  LaneF opacity2d = opacity;
  if (antialiased) opacity2d *= gsr_sqrt(gsr_max(LaneF(0), det_orig / det));
  vis = vis & (opacity2d >= LaneF(kAlphaMin));
  const LaneF k = support_radius_factor(opacity2d);
  const LaneF rx = gsr_ceil(k * gsr_sqrt(cov.a));
  const LaneF ry = gsr_ceil(k * gsr_sqrt(cov.c));
  vis = vis & !((rx <= LaneF(radius_clip)) & (ry <= LaneF(radius_clip)));
  const LaneF rz = LaneF(1) / p.z;
  const Vec2<LaneF> mean2d = {cam.fx * p.x * rz + cam.cx, cam.fy * p.y * rz + cam.cy};
  vis = vis & !((mean2d.x + rx <= LaneF(0)) | (mean2d.x - rx >= cam.width) |
                (mean2d.y + ry <= LaneF(0)) | (mean2d.y - ry >= cam.height));
  const LaneF inv_det = LaneF(1) / det;
  const Sym2<LaneF> conic = {cov.c * inv_det, -cov.b * inv_det, cov.a * inv_det};
  for (int l = 0; l < L; ++l) {
    const bool v = vis.m[l] != 0;
    out.radii[2 * l] = v ? static_cast<int>(gsr_min(rx[l], kMaxRadius<float>())) : 0;
    out.radii[2 * l + 1] = v ? static_cast<int>(gsr_min(ry[l], kMaxRadius<float>())) : 0;
    out.m2[2 * l] = v ? mean2d.x[l] : 0.0f;
    out.m2[2 * l + 1] = v ? mean2d.y[l] : 0.0f;
    out.d[l] = v ? p.z[l] : 0.0f;
    out.con[3 * l] = v ? conic.a[l] : 0.0f;
    out.con[3 * l + 1] = v ? conic.b[l] : 0.0f;
    out.con[3 * l + 2] = v ? conic.c[l] : 0.0f;
    out.o2[l] = v ? opacity2d[l] : 0.0f;
  }
}

// project_lanes for the next 8 Gaussians where it applies (float, a pinhole camera, left ≥ 8 of
// them in the chunk and the camera); false: the caller runs them one by one (the other lens
// models run per Gaussian: the lanes carry the pinhole rule only).
template <int Model, typename T>
bool project_lanes_if(int64_t left, const T* mp, const T* qp, const T* sp, const T* op,
                      const Camera<T>& cam, double eps2d, double near_plane, double far_plane,
                      double radius_clip, bool antialiased, int32_t* r, T* m2, T* d, T* con, T* o2) {
  if constexpr (std::is_same_v<T, float> && Model == kPinhole) {
    if (left < cpu::kLanes) return false;
    project_lanes(mp, qp, sp, op, cam, T(eps2d), T(near_plane), T(far_plane), T(radius_clip),
                  antialiased, LaneOut{r, m2, d, con, o2});
    return true;
  }
  return false;
}

// project_bwd's arrays for one call: the inputs of the backward and the gradients it adds to.
template <typename T>
struct ProjectBwdIO {
  const T *mp, *qp, *sp, *op;               // [N, 3], [N, 4], [N, 3], [N]
  const int32_t* radii;                     // [C, N, 2]
  const T *v_m2, *v_d, *v_con, *v_o2;       // [C, N, 2], [C, N], [C, N, 3], [C, N]
  T *g_means, *g_quats, *g_scales, *g_opac;  // [N, 3], [N, 4], [N, 3], [N], zeroed
};

// project_gaussian_bwd for 8 consecutive Gaussians n .. n + 7 in float, one per lane (the shared
// projection.h templates on cpu::LaneF), over every camera in camera order: each lane adds its
// visible cameras' gradients in the scalar loop's order (culled: nothing, not a zero) and
// part ([C, 12], double) gets each Gaussian's v_viewmat rows Gaussian by Gaussian — the
// scalar's bits (tests/test_project_sh.py, every ISA copy). Returns 8, or 0 (not float, a camera
// that is not pinhole, or fewer than 8 left: the caller runs them one by one).
template <int Model, typename T>
int project_bwd_lanes(const ProjectBwdIO<T>& io, int64_t n, int64_t left, int64_t C, int64_t N,
                      const Camera<T>* cams, T eps2d, bool antialiased, double* part) {
  if constexpr (std::is_same_v<T, float> && Model == kPinhole) {
    using cpu::LaneF;
    constexpr int L = cpu::kLanes;
    if (left < L) return 0;
    const GaussianLanes gl(io.mp + 3 * n, io.qp + 4 * n, io.sp + 3 * n, io.op + n);
    LaneF acc[11];  // v_mean, v_quat (w, x, y, z), v_scale, v_opacity of each lane
    for (LaneF& a : acc) a = LaneF(0.0f);
    for (int64_t c = 0; c < C; ++c) {
      const int64_t idx = c * N + n;
      cpu::LaneM vis;
      bool any = false;
      for (int l = 0; l < L; ++l) {
        const bool v = !(io.radii[2 * (idx + l)] <= 0 && io.radii[2 * (idx + l) + 1] <= 0);
        vis.m[l] = v ? -1 : 0, any |= v;
      }
      if (!any) continue;
      LaneF m2[2], d[1], con[3], o2[1];
      cpu::load_lanes<2>(io.v_m2 + 2 * idx, 2, m2), cpu::load_lanes<1>(io.v_d + idx, 1, d);
      cpu::load_lanes<3>(io.v_con + 3 * idx, 3, con), cpu::load_lanes<1>(io.v_o2 + idx, 1, o2);
      const ProjectGrads<LaneF> g = project_gaussian_bwd<kPinhole>(
          gl.mean, gl.quat, gl.scale, gl.opacity, camera_lanes(cams[c]), LaneF(eps2d),
          antialiased, Vec2<LaneF>{m2[0], m2[1]}, d[0], Sym2<LaneF>{con[0], con[1], con[2]}, o2[0]);
      const LaneF v[11] = {g.v_mean.x,  g.v_mean.y,  g.v_mean.z,  g.v_quat.w,
                           g.v_quat.x,  g.v_quat.y,  g.v_quat.z,  g.v_scale.x,
                           g.v_scale.y, g.v_scale.z, g.v_opacity};
      for (int k = 0; k < 11; ++k) acc[k] = select(vis, acc[k] + v[k], acc[k]);
      double* pc = part + 12 * c;
      const LaneF vt[3] = {g.v_t.x, g.v_t.y, g.v_t.z};
      for (int l = 0; l < L; ++l) {
        if (!vis.m[l]) continue;
        for (int i = 0; i < 3; ++i) {
          for (int j = 0; j < 3; ++j) pc[4 * i + j] += g.v_R.m[i][j][l];
          pc[4 * i + 3] += vt[i][l];
        }
      }
    }
    for (int l = 0; l < L; ++l) {
      const int64_t i = n + l;
      for (int k = 0; k < 3; ++k)
        io.g_means[3 * i + k] = acc[k][l], io.g_scales[3 * i + k] = acc[7 + k][l];
      for (int k = 0; k < 4; ++k) io.g_quats[4 * i + k] = acc[3 + k][l];
      io.g_opac[i] = acc[10][l];
    }
    return L;
  }
  return 0;
}

}  // namespace

namespace cpu {

template <typename T>
void project_fwd(const ProjectFwdArgs<T>& a) {
  const T *mp = a.means, *qp = a.quats, *sp = a.scales, *op = a.opacities;
  const T *vp = a.viewmats, *kp = a.Ks;
  int32_t* radii_p = a.radii;
  T *m2_p = a.means2d, *d_p = a.depths, *con_p = a.conics, *o2_p = a.opacities2d;
  const int64_t C = a.C, N = a.N;
  const int width = a.width, height = a.height;
  const double eps2d = a.eps2d, near_plane = a.near_plane, far_plane = a.far_plane,
               radius_clip = a.radius_clip;
  const bool antialiased = a.antialiased;
  const auto camera = [&](int64_t c) {
    return load_camera(vp + 16 * c, kp + 9 * c, width,
                       height);
  };
  with_camera_model(a.camera_model, [&](auto lens) {
    constexpr int Model = decltype(lens)::value;
    cpu::parallel_for(0, C * N, 1024, [&](int64_t begin, int64_t end) {
      // the camera loaded once per chunk and per camera change, no division per Gaussian
      int64_t c = begin / N, n = begin - c * N;
      Camera<T> cam = camera(c);
      for (int64_t idx = begin; idx < end; ++idx, ++n) {
        if (n == N) n = 0, cam = camera(++c);
        if (project_lanes_if<Model>(std::min(end - idx, N - n), mp + 3 * n, qp + 4 * n,
                                    sp + 3 * n, op + n, cam, eps2d, near_plane, far_plane,
                                    radius_clip, antialiased, radii_p + 2 * idx,
                                    m2_p + 2 * idx, d_p + idx, con_p + 3 * idx, o2_p + idx)) {
          idx += cpu::kLanes - 1, n += cpu::kLanes - 1;
          continue;
        }
        const Vec4<T> quat = {qp[4 * n], qp[4 * n + 1], qp[4 * n + 2], qp[4 * n + 3]};
        const Projected<T> r = project_gaussian<Model>(
            load_vec3(mp + 3 * n), quat, load_vec3(sp + 3 * n), op[n], cam, T(eps2d),
            T(near_plane), T(far_plane), T(radius_clip), antialiased);
        store_projected(r, idx, radii_p, m2_p, d_p, con_p, o2_p);
      }
    });
  });
}

template <typename T>
void project_bwd(const ProjectBwdArgs<T>& a) {
  const T *mp = a.means, *qp = a.quats, *sp = a.scales, *op = a.opacities;
  const T *vp = a.viewmats, *kp = a.Ks;
  const int32_t* rp = a.radii;
  const T *vm2 = a.v_means2d, *vd = a.v_depths, *vc = a.v_conics, *vo2 = a.v_opacities2d;
  T *g_means = a.v_means, *g_quats = a.v_quats, *g_scales = a.v_scales, *g_opac = a.v_opacities;
  const int64_t C = a.C, N = a.N;
  const int width = a.width, height = a.height;
  const double eps2d = a.eps2d;
  const bool antialiased = a.antialiased;
  // Per block of Gaussians, its [C, 12] share of v_viewmats (rows 0..2 of the 4×4),
  // accumulated in double and summed over blocks in a fixed order afterwards.
  const int64_t num_blocks = (N + kBwdBlock - 1) / kBwdBlock;
  std::vector<double> partial(static_cast<size_t>(num_blocks * C * 12), 0.0);
  std::vector<Camera<T>> cams;
  for (int64_t c = 0; c < C; ++c)
    cams.push_back(load_camera(vp + 16 * c, kp + 9 * c, width,
                               height));
  const ProjectBwdIO<T> io{mp, qp, sp, op, rp, vm2, vd,
                           vc, vo2, g_means, g_quats, g_scales, g_opac};

  with_camera_model(a.camera_model, [&](auto lens) {
    constexpr int Model = decltype(lens)::value;
    cpu::parallel_for(0, num_blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        double* part = partial.data() + blk * C * 12;
        const int64_t n_end = std::min(N, (blk + 1) * kBwdBlock);
        for (int64_t n = blk * kBwdBlock; n < n_end; ++n) {
          if (const int done = project_bwd_lanes<Model>(io, n, n_end - n, C, N, cams.data(),
                                                        T(eps2d), antialiased, part)) {
            n += done - 1;
            continue;
          }
          const Vec3<T> mean = load_vec3(mp + 3 * n);
          const Vec4<T> quat = {qp[4 * n], qp[4 * n + 1], qp[4 * n + 2], qp[4 * n + 3]};
          const Vec3<T> scale = load_vec3(sp + 3 * n);
          for (int64_t c = 0; c < C; ++c) {
            const int64_t idx = c * N + n;
            if (rp[2 * idx] <= 0 && rp[2 * idx + 1] <= 0) continue;  // culled: zero gradient
            const ProjectGrads<T> g = project_gaussian_bwd<Model>(
                mean, quat, scale, op[n], cams[c], T(eps2d), antialiased,
                Vec2<T>{vm2[2 * idx], vm2[2 * idx + 1]}, vd[idx],
                Sym2<T>{vc[3 * idx], vc[3 * idx + 1], vc[3 * idx + 2]}, vo2[idx]);
            g_means[3 * n] += g.v_mean.x;
            g_means[3 * n + 1] += g.v_mean.y;
            g_means[3 * n + 2] += g.v_mean.z;
            g_quats[4 * n] += g.v_quat.w;
            g_quats[4 * n + 1] += g.v_quat.x;
            g_quats[4 * n + 2] += g.v_quat.y;
            g_quats[4 * n + 3] += g.v_quat.z;
            g_scales[3 * n] += g.v_scale.x;
            g_scales[3 * n + 1] += g.v_scale.y;
            g_scales[3 * n + 2] += g.v_scale.z;
            g_opac[n] += g.v_opacity;
            double* pc = part + 12 * c;
            const T vt[3] = {g.v_t.x, g.v_t.y, g.v_t.z};
            for (int i = 0; i < 3; ++i) {
              for (int j = 0; j < 3; ++j) pc[4 * i + j] += g.v_R.m[i][j];
              pc[4 * i + 3] += vt[i];
            }
          }
        }
      }
    });
  });

  T* g_view = a.v_viewmats;
  for (int64_t c = 0; c < C; ++c) {
    double acc[12] = {0.0};
    for (int64_t blk = 0; blk < num_blocks; ++blk)
      for (int e = 0; e < 12; ++e) acc[e] += partial[(blk * C + c) * 12 + e];
    for (int e = 0; e < 12; ++e) g_view[16 * c + e] = static_cast<T>(acc[e]);
  }
}

template void project_fwd<float>(const ProjectFwdArgs<float>&);
template void project_fwd<double>(const ProjectFwdArgs<double>&);
template void project_bwd<float>(const ProjectBwdArgs<float>&);
template void project_bwd<double>(const ProjectBwdArgs<double>&);

}  // namespace cpu
}  // namespace gsrender
