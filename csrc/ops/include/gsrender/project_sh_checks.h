// Input validation for the projection and SH ops, shared by the CPU and CUDA backends (host
// code only; defined in csrc/ops/cpu/project_sh_checks.cpp). Bad shapes/values raise ValueError,
// bad dtypes TypeError, each naming the argument.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "gsrender/camera.h"

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

// The validated, contiguous inputs of project_fwd/_bwd, so both backends start from the same
// prepared tensors and differ only in how they loop.
struct ProjectInputs {
  int64_t C, N;
  at::Tensor means, quats, scales, opacities, viewmats, Ks;
};
ProjectInputs prepare_project_inputs(const at::Tensor& means, const at::Tensor& quats,
                                     const at::Tensor& scales, const at::Tensor& opacities,
                                     const at::Tensor& viewmats, const at::Tensor& Ks,
                                     int64_t width, int64_t height, double eps2d);

// project_fwd's outputs, allocated: radii [C,N,2] int32, means2d [C,N,2], depths [C,N],
// conics [C,N,3], opacities2d [C,N].
struct ProjectOutputs {
  at::Tensor radii, means2d, depths, conics, opacities2d;
};
ProjectOutputs empty_project_outputs(int64_t C, int64_t N, const at::TensorOptions& opts);

// camera_model: a CameraModel value (gsrender/camera.h: 0 pinhole, 1 ortho, 2 fisheye).
inline void check_camera_model(int64_t camera_model) {
  TORCH_CHECK_VALUE(camera_model >= 0 && camera_model < kNumCameraModels,
                    "camera_model must be 0 (pinhole), 1 (ortho) or 2 (fisheye), got ",
                    camera_model);
}

// project_bwd's checked, contiguous incoming gradients (and radii).
struct ProjectGradInputs {
  at::Tensor radii, v_means2d, v_depths, v_conics, v_opacities2d;
};
ProjectGradInputs prepare_project_grads(const at::Tensor& means, int64_t C, int64_t N,
                                        const at::Tensor& radii, const at::Tensor& v_means2d,
                                        const at::Tensor& v_depths, const at::Tensor& v_conics,
                                        const at::Tensor& v_opacities2d);

// project_bwd's outputs, zero-initialised: v_means [N,3], v_quats [N,4], v_scales [N,3],
// v_opacities [N], v_viewmats [C,4,4] (last row stays 0).
struct ProjectGradOutputs {
  at::Tensor v_means, v_quats, v_scales, v_opacities, v_viewmats;
};
ProjectGradOutputs zero_project_grads(int64_t C, int64_t N, const at::TensorOptions& opts);

// degree in 0..3, dirs [C,N,3], coeffs [N,K,3] with K >= (degree+1)^2, same dtype and device.
void check_sh_inputs(int64_t degree, const at::Tensor& dirs, const at::Tensor& coeffs);

// v_colors [C,N,3] like dirs.
void check_sh_grads(const at::Tensor& dirs, const at::Tensor& v_colors);

// sh_channels_fwd / _bwd: means [N, 3], campos [C, 3], coeffs as for sh_fwd (N from means).
void check_sh_channels_inputs(int64_t degree, const at::Tensor& means, const at::Tensor& campos,
                              const at::Tensor& coeffs);

}  // namespace gsrender
