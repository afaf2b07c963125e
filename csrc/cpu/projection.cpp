// CPU kernels of project_fwd / project_bwd: the per-(camera, Gaussian) math lives in
// gsrender/projection.h; this file only loops, validates and allocates.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "gsrender/project_sh_checks.h"
#include "gsrender/projection.h"
#include "isa.h"

namespace gsrender {
namespace {

using at::Tensor;

// Gaussians per backward work item: fixed (not per thread) so the viewmat reduction order, and
// hence the result, does not depend on the number of threads.
constexpr int64_t kBwdBlock = 256;

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> project_fwd_cpu(
    const Tensor& means, const Tensor& quats, const Tensor& scales, const Tensor& opacities,
    const Tensor& viewmats, const Tensor& Ks, int64_t width, int64_t height, double eps2d,
    double near_plane, double far_plane, double radius_clip, bool antialiased) {
  const auto [C, N, means_c, quats_c, scales_c, opacities_c, viewmats_c, Ks_c] =
      prepare_project_inputs(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d);
  const auto [radii, means2d, depths, conics, opacities2d] =
      empty_project_outputs(C, N, means.options());

  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "project_fwd_cpu", [&] {
    using T = scalar_t;
    const T* mp = means_c.data_ptr<T>();
    const T* qp = quats_c.data_ptr<T>();
    const T* sp = scales_c.data_ptr<T>();
    const T* op = opacities_c.data_ptr<T>();
    const T* vp = viewmats_c.data_ptr<T>();
    const T* kp = Ks_c.data_ptr<T>();
    int32_t* radii_p = radii.data_ptr<int32_t>();
    T* m2_p = means2d.data_ptr<T>();
    T* d_p = depths.data_ptr<T>();
    T* con_p = conics.data_ptr<T>();
    T* o2_p = opacities2d.data_ptr<T>();
    const auto camera = [&](int64_t c) {
      return load_camera(vp + 16 * c, kp + 9 * c, static_cast<int>(width),
                         static_cast<int>(height));
    };
    cpu::parallel_for(0, C * N, 1024, [&](int64_t begin, int64_t end) {
      // the camera loaded once per chunk and per camera change, no division per Gaussian
      int64_t c = begin / N, n = begin - c * N;
      Camera<T> cam = camera(c);
      for (int64_t idx = begin; idx < end; ++idx, ++n) {
        if (n == N) n = 0, cam = camera(++c);
        const Projected<T> r = project_gaussian(
            load_vec3(mp + 3 * n), Vec4<T>{qp[4 * n], qp[4 * n + 1], qp[4 * n + 2], qp[4 * n + 3]},
            load_vec3(sp + 3 * n), op[n], cam, T(eps2d), T(near_plane), T(far_plane),
            T(radius_clip), antialiased);
        radii_p[2 * idx] = r.radius_x;
        radii_p[2 * idx + 1] = r.radius_y;
        m2_p[2 * idx] = r.mean2d.x;
        m2_p[2 * idx + 1] = r.mean2d.y;
        d_p[idx] = r.depth;
        con_p[3 * idx] = r.conic.a;
        con_p[3 * idx + 1] = r.conic.b;
        con_p[3 * idx + 2] = r.conic.c;
        o2_p[idx] = r.opacity2d;
      }
    });
  });
  return {radii, means2d, depths, conics, opacities2d};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> project_bwd_cpu(
    const Tensor& means, const Tensor& quats, const Tensor& scales, const Tensor& opacities,
    const Tensor& viewmats, const Tensor& Ks, int64_t width, int64_t height, double eps2d,
    bool antialiased, const Tensor& radii, const Tensor& v_means2d, const Tensor& v_depths,
    const Tensor& v_conics, const Tensor& v_opacities2d) {
  const auto [C, N, means_c, quats_c, scales_c, opacities_c, viewmats_c, Ks_c] =
      prepare_project_inputs(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d);
  const auto [radii_c, v_means2d_c, v_depths_c, v_conics_c, v_opacities2d_c] =
      prepare_project_grads(means, C, N, radii, v_means2d, v_depths, v_conics, v_opacities2d);
  const auto [v_means, v_quats, v_scales, v_opacities, v_viewmats] =
      zero_project_grads(C, N, means.options());

  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "project_bwd_cpu", [&] {
    using T = scalar_t;
    const T* mp = means_c.data_ptr<T>();
    const T* qp = quats_c.data_ptr<T>();
    const T* sp = scales_c.data_ptr<T>();
    const T* op = opacities_c.data_ptr<T>();
    const T* vp = viewmats_c.data_ptr<T>();
    const T* kp = Ks_c.data_ptr<T>();
    const int32_t* rp = radii_c.data_ptr<int32_t>();
    const T* vm2 = v_means2d_c.data_ptr<T>();
    const T* vd = v_depths_c.data_ptr<T>();
    const T* vc = v_conics_c.data_ptr<T>();
    const T* vo2 = v_opacities2d_c.data_ptr<T>();
    T* g_means = v_means.data_ptr<T>();
    T* g_quats = v_quats.data_ptr<T>();
    T* g_scales = v_scales.data_ptr<T>();
    T* g_opac = v_opacities.data_ptr<T>();

    // Per block of Gaussians, its [C, 12] share of v_viewmats (rows 0..2 of the 4×4),
    // accumulated in double and summed over blocks in a fixed order afterwards.
    const int64_t num_blocks = (N + kBwdBlock - 1) / kBwdBlock;
    std::vector<double> partial(static_cast<size_t>(num_blocks * C * 12), 0.0);

    cpu::parallel_for(0, num_blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        double* part = partial.data() + blk * C * 12;
        const int64_t n_end = std::min(N, (blk + 1) * kBwdBlock);
        for (int64_t n = blk * kBwdBlock; n < n_end; ++n) {
          const Vec3<T> mean = load_vec3(mp + 3 * n);
          const Vec4<T> quat = {qp[4 * n], qp[4 * n + 1], qp[4 * n + 2], qp[4 * n + 3]};
          const Vec3<T> scale = load_vec3(sp + 3 * n);
          for (int64_t c = 0; c < C; ++c) {
            const int64_t idx = c * N + n;
            if (rp[2 * idx] <= 0 && rp[2 * idx + 1] <= 0) continue;  // culled: zero gradient
            const Camera<T> cam = load_camera(vp + 16 * c, kp + 9 * c, static_cast<int>(width),
                                              static_cast<int>(height));
            const ProjectGrads<T> g = project_gaussian_bwd(
                mean, quat, scale, op[n], cam, T(eps2d), antialiased,
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

    T* g_view = v_viewmats.data_ptr<T>();
    for (int64_t c = 0; c < C; ++c) {
      double acc[12] = {0.0};
      for (int64_t blk = 0; blk < num_blocks; ++blk)
        for (int e = 0; e < 12; ++e) acc[e] += partial[(blk * C + c) * 12 + e];
      for (int e = 0; e < 12; ++e) g_view[16 * c + e] = static_cast<T>(acc[e]);
    }
  });
  return {v_means, v_quats, v_scales, v_opacities, v_viewmats};
}

}  // namespace
}  // namespace gsrender

TORCH_LIBRARY_IMPL(gsrender, CPU, m) {
  m.impl("project_fwd", &gsrender::project_fwd_cpu);
  m.impl("project_bwd", &gsrender::project_bwd_cpu);
}
