// The checks render.py makes on the Gaussians rasterize is given (CPU), in one parallel pass
// over the four tensors: _C.gaussian_faults, read by render.py's _check_inputs.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace gsrender {

// One bit per fault, in the order render.py reports them (its order before the pass).
enum GaussianFault : uint32_t {
  kMeansNonFinite = 1u << 0,
  kQuatsNonFinite = 1u << 1,
  kScalesNonFinite = 1u << 2,
  kOpacitiesNonFinite = 1u << 3,
  kScalesNotPositive = 1u << 4,
  kQuatZero = 1u << 5,          // |q| < 1e-12
  kOpacityOutside = 1u << 6,    // outside [0, 1]
};

// The faults of means [N, 3], quats [N, 4], scales [N, 3], opacities [N] (CPU, float32 or
// float64, one dtype; shapes, dtypes and devices checked by the caller).
uint32_t gaussian_faults(const at::Tensor& means, const at::Tensor& quats, const at::Tensor& scales,
                         const at::Tensor& opacities);

}  // namespace gsrender
