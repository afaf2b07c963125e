// The sh_fwd / sh_bwd and sh_channels_fwd / _bwd ops on the CPU: check their arguments,
// allocate the outputs and run sh_kernel.cpp (the per-Gaussian passes).
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <tuple>

#include "gsrender/checks.h"
#include "gsrender/host_alloc.h"
#include "gsrender/project_sh_checks.h"
#include "cpu/sh_kernel.h"

namespace gsrender {
namespace {

using at::Tensor;

Tensor sh_fwd_cpu(int64_t degree, const Tensor& dirs, const Tensor& coeffs) {
  check_sh_inputs(degree, dirs, coeffs);
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  const Tensor dirs_c = dirs.contiguous(), coeffs_c = coeffs.contiguous();
  Tensor colors = at::empty({C, N, 3}, dirs.options());  // [C, N, 3]
  AT_DISPATCH_FLOATING_TYPES(dirs.scalar_type(), "sh_fwd_cpu", [&] {
    using T = scalar_t;
    cpu::sh_fwd_gaussians<T>(degree, dirs_c.data_ptr<T>(), coeffs_c.data_ptr<T>(), C, N, K,
                             colors.data_ptr<T>());
  });
  return colors;
}

std::tuple<Tensor, Tensor> sh_bwd_cpu(int64_t degree, const Tensor& dirs, const Tensor& coeffs,
                                      const Tensor& v_colors) {
  check_sh_inputs(degree, dirs, coeffs);
  check_sh_grads(dirs, v_colors);
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  const Tensor dirs_c = dirs.contiguous(), coeffs_c = coeffs.contiguous(),
               v_colors_c = v_colors.contiguous();
  Tensor v_dirs = at::empty({C, N, 3}, dirs.options());     // [C, N, 3]
  Tensor v_coeffs = at::zeros({N, K, 3}, dirs.options());  // [N, K, 3], 0 for k >= (deg+1)^2
  AT_DISPATCH_FLOATING_TYPES(dirs.scalar_type(), "sh_bwd_cpu", [&] {
    using T = scalar_t;
    cpu::sh_bwd_gaussians<T>(degree, dirs_c.data_ptr<T>(), coeffs_c.data_ptr<T>(),
                             v_colors_c.data_ptr<T>(), C, N, K, v_dirs.data_ptr<T>(),
                             v_coeffs.data_ptr<T>());
  });
  return {v_dirs, v_coeffs};
}

Tensor sh_channels_fwd_cpu(int64_t degree, const Tensor& means, const Tensor& campos,
                           const Tensor& coeffs, const Tensor& depths,
                           const c10::optional<Tensor>& features) {
  check_sh_channels_inputs(degree, means, campos, coeffs);
  const int64_t C = campos.size(0), N = means.size(0), K = coeffs.size(1);
  check_shape(depths, "depths", {C, N}, "[C, N] (C from campos, N from means)");
  check_like(depths, "depths", means, "means");
  Tensor feat;
  if (features) {
    feat = features->contiguous();
    if (feat.dim() == 2)
      check_shape(feat, "features", {N, -1}, "[N, D] or [C, N, D]");
    else
      check_shape(feat, "features", {C, N, -1}, "[N, D] or [C, N, D]");
    check_like(feat, "features", means, "means");
  }
  const int64_t D = feat.defined() ? feat.size(-1) : 0, CH = 4 + D;
  const bool per_camera = feat.defined() && feat.dim() == 3;
  const Tensor means_c = means.contiguous(), campos_c = campos.contiguous(),
               coeffs_c = coeffs.contiguous(), depths_c = depths.contiguous();
  Tensor out = empty_host({C, N, CH}, means.options());  // [C, N, 4 + D]
  cpu::ShChannelsFinite finite;
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "sh_channels_fwd_cpu", [&] {
    using T = scalar_t;
    finite = cpu::sh_channels_fwd_gaussians<T>(
        degree, means_c.data_ptr<T>(), campos_c.data_ptr<T>(), coeffs_c.data_ptr<T>(),
        depths_c.data_ptr<T>(), feat.defined() ? feat.data_ptr<T>() : nullptr, per_camera, C, N,
        K, D, out.data_ptr<T>());
  });
  TORCH_CHECK_VALUE(finite.coeffs, "coeffs (the SH coefficients: rasterize's colors) "
                                   "contains NaN or Inf");
  TORCH_CHECK_VALUE(finite.features, "features contains NaN or Inf");
  return out;
}

std::tuple<Tensor, Tensor, Tensor> sh_channels_bwd_cpu(int64_t degree, const Tensor& means,
                                                       const Tensor& campos,
                                                       const Tensor& coeffs,
                                                       const Tensor& v_channels) {
  check_sh_channels_inputs(degree, means, campos, coeffs);
  const int64_t C = campos.size(0), N = means.size(0), K = coeffs.size(1);
  check_shape(v_channels, "v_channels", {C, N, -1}, "[C, N, CH] (C from campos, N from means)");
  TORCH_CHECK_VALUE(v_channels.size(2) >= 3, "v_channels must have CH >= 3 channels, got ",
                    v_channels.size(2));
  check_like(v_channels, "v_channels", means, "means");
  const int64_t CH = v_channels.size(2);
  const Tensor means_c = means.contiguous(), campos_c = campos.contiguous(),
               coeffs_c = coeffs.contiguous(), v_c = v_channels.contiguous();
  // Zeroed row by row by the block that owns it (0 for k >= (deg+1)^2), not in a pass of
  // their own over [N, K, 3] before the kernel.
  Tensor v_means = at::empty({N, 3}, means.options());
  Tensor v_coeffs = empty_host({N, K, 3}, means.options());
  Tensor v_campos = at::empty({C, 3}, means.options());
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "sh_channels_bwd_cpu", [&] {
    using T = scalar_t;
    cpu::sh_channels_bwd_gaussians<T>(degree, means_c.data_ptr<T>(), campos_c.data_ptr<T>(),
                                      coeffs_c.data_ptr<T>(), v_c.data_ptr<T>(), C, N, K, CH,
                                      v_means.data_ptr<T>(), v_coeffs.data_ptr<T>(),
                                      v_campos.data_ptr<T>());
  });
  return {v_means, v_campos, v_coeffs};
}

}  // namespace
}  // namespace gsrender

TORCH_LIBRARY_IMPL(gsrender, CPU, m) {
  m.impl("sh_fwd", &gsrender::sh_fwd_cpu);
  m.impl("sh_bwd", &gsrender::sh_bwd_cpu);
  m.impl("sh_channels_fwd", &gsrender::sh_channels_fwd_cpu);
  m.impl("sh_channels_bwd", &gsrender::sh_channels_bwd_cpu);
}
