// Validation of the projection / SH op inputs (see gsrender/project_sh_checks.h).
#include "gsrender/project_sh_checks.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include "gsrender/checks.h"
#include "gsrender/host_alloc.h"
#include "gsrender/sh.h"

namespace gsrender {

void check_project_inputs(const at::Tensor& means, const at::Tensor& quats,
                          const at::Tensor& scales, const at::Tensor& opacities,
                          const at::Tensor& viewmats, const at::Tensor& Ks, int64_t width,
                          int64_t height, double eps2d, int64_t& C, int64_t& N) {
  check_shape(means, "means", {-1, 3}, "[N, 3]");
  N = means.size(0);
  check_shape(viewmats, "viewmats", {-1, 4, 4}, "[C, 4, 4]");
  C = viewmats.size(0);
  check_shape(quats, "quats", {N, 4}, "[N, 4] (N from means)");
  check_shape(scales, "scales", {N, 3}, "[N, 3] (N from means)");
  check_shape(opacities, "opacities", {N}, "[N] (N from means)");
  check_shape(Ks, "Ks", {C, 3, 3}, "[C, 3, 3] (C from viewmats)");
  check_floating(means, "means");
  check_like(quats, "quats", means, "means");
  check_like(scales, "scales", means, "means");
  check_like(opacities, "opacities", means, "means");
  check_like(viewmats, "viewmats", means, "means");
  check_like(Ks, "Ks", means, "means");
  check_image_size(width, height);
  TORCH_CHECK_VALUE(eps2d >= 0.0, "eps2d must be >= 0, got ", eps2d);
}

void check_project_grads(const at::Tensor& means, int64_t C, int64_t N, const at::Tensor& radii,
                         const at::Tensor& v_means2d, const at::Tensor& v_depths,
                         const at::Tensor& v_conics, const at::Tensor& v_opacities2d) {
  check_shape(radii, "radii", {C, N, 2}, "[C, N, 2]");
  TORCH_CHECK_TYPE(radii.scalar_type() == at::kInt, "radii must be int32, got ",
                   radii.scalar_type());
  TORCH_CHECK_VALUE(radii.device() == means.device(), "radii must be on the device of means (",
                    means.device(), "), got ", radii.device());
  check_shape(v_means2d, "v_means2d", {C, N, 2}, "[C, N, 2]");
  check_shape(v_depths, "v_depths", {C, N}, "[C, N]");
  check_shape(v_conics, "v_conics", {C, N, 3}, "[C, N, 3]");
  check_shape(v_opacities2d, "v_opacities2d", {C, N}, "[C, N]");
  check_like(v_means2d, "v_means2d", means, "means");
  check_like(v_depths, "v_depths", means, "means");
  check_like(v_conics, "v_conics", means, "means");
  check_like(v_opacities2d, "v_opacities2d", means, "means");
}

namespace {

// degree in range and coeffs [N, K, 3] with enough coefficients for it (shape: the message's).
void check_sh_coeffs(int64_t degree, const at::Tensor& coeffs, int64_t N, const char* shape) {
  TORCH_CHECK_VALUE(degree >= 0 && degree <= kMaxShDegree, "degree must be in 0..",
                    kMaxShDegree, ", got ", degree);
  check_shape(coeffs, "coeffs", {N, -1, 3}, shape);
  const int64_t need = (degree + 1) * (degree + 1);
  TORCH_CHECK_VALUE(coeffs.size(1) >= need, "coeffs must have K >= (degree+1)^2 = ", need,
                    " coefficients for degree ", degree, ", got K = ", coeffs.size(1));
}

}  // namespace

void check_sh_inputs(int64_t degree, const at::Tensor& dirs, const at::Tensor& coeffs) {
  check_shape(dirs, "dirs", {-1, -1, 3}, "[C, N, 3]");
  check_sh_coeffs(degree, coeffs, dirs.size(1), "[N, K, 3] (N from dirs)");
  check_floating(dirs, "dirs");
  check_like(coeffs, "coeffs", dirs, "dirs");
}

void check_sh_channels_inputs(int64_t degree, const at::Tensor& means, const at::Tensor& campos,
                              const at::Tensor& coeffs) {
  check_shape(means, "means", {-1, 3}, "[N, 3]");
  check_shape(campos, "campos", {-1, 3}, "[C, 3]");
  check_sh_coeffs(degree, coeffs, means.size(0), "[N, K, 3] (N from means)");
  check_floating(means, "means");
  check_like(campos, "campos", means, "means");
  check_like(coeffs, "coeffs", means, "means");
}

void check_sh_grads(const at::Tensor& dirs, const at::Tensor& v_colors) {
  check_shape(v_colors, "v_colors", {dirs.size(0), dirs.size(1), 3}, "[C, N, 3] (like dirs)");
  check_like(v_colors, "v_colors", dirs, "dirs");
}

ProjectInputs prepare_project_inputs(const at::Tensor& means, const at::Tensor& quats,
                                     const at::Tensor& scales, const at::Tensor& opacities,
                                     const at::Tensor& viewmats, const at::Tensor& Ks,
                                     int64_t width, int64_t height, double eps2d) {
  int64_t C = 0, N = 0;
  check_project_inputs(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d, C, N);
  return {C,
          N,
          means.contiguous(),
          quats.contiguous(),
          scales.contiguous(),
          opacities.contiguous(),
          viewmats.contiguous(),
          Ks.contiguous()};
}

ProjectOutputs empty_project_outputs(int64_t C, int64_t N, const at::TensorOptions& opts) {
  return {empty_output({C, N, 2}, opts.dtype(at::kInt)), empty_output({C, N, 2}, opts),
          empty_output({C, N}, opts), empty_output({C, N, 3}, opts), empty_output({C, N}, opts)};
}

ProjectGradInputs prepare_project_grads(const at::Tensor& means, int64_t C, int64_t N,
                                        const at::Tensor& radii, const at::Tensor& v_means2d,
                                        const at::Tensor& v_depths, const at::Tensor& v_conics,
                                        const at::Tensor& v_opacities2d) {
  check_project_grads(means, C, N, radii, v_means2d, v_depths, v_conics, v_opacities2d);
  return {radii.contiguous(), v_means2d.contiguous(), v_depths.contiguous(),
          v_conics.contiguous(), v_opacities2d.contiguous()};
}

ProjectGradOutputs zero_project_grads(int64_t C, int64_t N, const at::TensorOptions& opts) {
  return {zeros_output({N, 3}, opts), zeros_output({N, 4}, opts), zeros_output({N, 3}, opts),
          zeros_output({N}, opts), at::zeros({C, 4, 4}, opts)};
}

}  // namespace gsrender
