// The projection ops on the CPU (project_fwd / project_bwd): checks, outputs, dispatch on the
// dtype; the loops are cpu/projection_kernel.cpp's.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <tuple>

#include "cpu/projection_kernel.h"
#include "gsrender/project_sh_checks.h"

namespace gsrender {
namespace {

using at::Tensor;

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> project_fwd_cpu(
    const Tensor& means, const Tensor& quats, const Tensor& scales, const Tensor& opacities,
    const Tensor& viewmats, const Tensor& Ks, int64_t width, int64_t height, double eps2d,
    double near_plane, double far_plane, double radius_clip, bool antialiased,
    int64_t camera_model) {
  const auto [C, N, means_c, quats_c, scales_c, opacities_c, viewmats_c, Ks_c] =
      prepare_project_inputs(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d);
  check_camera_model(camera_model);
  const auto [radii, means2d, depths, conics, opacities2d] =
      empty_project_outputs(C, N, means.options());

  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "project_fwd_cpu", [&] {
    using T = scalar_t;
    cpu::project_fwd<T>({means_c.data_ptr<T>(), quats_c.data_ptr<T>(), scales_c.data_ptr<T>(),
                         opacities_c.data_ptr<T>(), viewmats_c.data_ptr<T>(), Ks_c.data_ptr<T>(),
                         C, N, static_cast<int>(width), static_cast<int>(height),
                         static_cast<int>(camera_model), eps2d, near_plane, far_plane,
                         radius_clip, antialiased, radii.data_ptr<int32_t>(),
                         means2d.data_ptr<T>(), depths.data_ptr<T>(), conics.data_ptr<T>(),
                         opacities2d.data_ptr<T>()});
  });
  return {radii, means2d, depths, conics, opacities2d};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> project_bwd_cpu(
    const Tensor& means, const Tensor& quats, const Tensor& scales, const Tensor& opacities,
    const Tensor& viewmats, const Tensor& Ks, int64_t width, int64_t height, double eps2d,
    bool antialiased, const Tensor& radii, const Tensor& v_means2d, const Tensor& v_depths,
    const Tensor& v_conics, const Tensor& v_opacities2d, int64_t camera_model) {
  const auto [C, N, means_c, quats_c, scales_c, opacities_c, viewmats_c, Ks_c] =
      prepare_project_inputs(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d);
  check_camera_model(camera_model);
  const auto [radii_c, v_means2d_c, v_depths_c, v_conics_c, v_opacities2d_c] =
      prepare_project_grads(means, C, N, radii, v_means2d, v_depths, v_conics, v_opacities2d);
  const auto [v_means, v_quats, v_scales, v_opacities, v_viewmats] =
      zero_project_grads(C, N, means.options());

  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "project_bwd_cpu", [&] {
    using T = scalar_t;
    cpu::project_bwd<T>({means_c.data_ptr<T>(), quats_c.data_ptr<T>(), scales_c.data_ptr<T>(),
                         opacities_c.data_ptr<T>(), viewmats_c.data_ptr<T>(), Ks_c.data_ptr<T>(),
                         C, N, static_cast<int>(width), static_cast<int>(height),
                         static_cast<int>(camera_model), eps2d, antialiased,
                         radii_c.data_ptr<int32_t>(), v_means2d_c.data_ptr<T>(),
                         v_depths_c.data_ptr<T>(), v_conics_c.data_ptr<T>(),
                         v_opacities2d_c.data_ptr<T>(), v_means.data_ptr<T>(),
                         v_quats.data_ptr<T>(), v_scales.data_ptr<T>(), v_opacities.data_ptr<T>(),
                         v_viewmats.data_ptr<T>()});
  });
  return {v_means, v_quats, v_scales, v_opacities, v_viewmats};
}

}  // namespace
}  // namespace gsrender

TORCH_LIBRARY_IMPL(gsrender, CPU, m) {
  m.impl("project_fwd", &gsrender::project_fwd_cpu);
  m.impl("project_bwd", &gsrender::project_bwd_cpu);
}
