// Input validation for the projection and SH ops, shared by the CPU and CUDA backends (host
// code only; defined in csrc/cpu/project_sh_checks.cpp). Bad shapes/values raise ValueError,
// bad dtypes TypeError, each naming the argument.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace gsrender {

// means [N,3], quats [N,4], scales [N,3], opacities [N], viewmats [C,4,4], Ks [C,3,3]: one
// floating dtype (float32/float64), one device. Sets C and N.
void check_project_inputs(const at::Tensor& means, const at::Tensor& quats,
                          const at::Tensor& scales, const at::Tensor& opacities,
                          const at::Tensor& viewmats, const at::Tensor& Ks, int64_t width,
                          int64_t height, double eps2d, int64_t& C, int64_t& N);

// radii [C,N,2] int32; v_means2d [C,N,2], v_depths [C,N], v_conics [C,N,3], v_opacities2d [C,N]
// with the dtype and device of means.
void check_project_grads(const at::Tensor& means, int64_t C, int64_t N, const at::Tensor& radii,
                         const at::Tensor& v_means2d, const at::Tensor& v_depths,
                         const at::Tensor& v_conics, const at::Tensor& v_opacities2d);

// degree in 0..3, dirs [C,N,3], coeffs [N,K,3] with K >= (degree+1)^2, same dtype and device.
void check_sh_inputs(int64_t degree, const at::Tensor& dirs, const at::Tensor& coeffs);

// v_colors [C,N,3] like dirs.
void check_sh_grads(const at::Tensor& dirs, const at::Tensor& v_colors);

}  // namespace gsrender
