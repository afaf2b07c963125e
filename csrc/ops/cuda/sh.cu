// Torch glue of sh_fwd / sh_bwd on CUDA: checks, allocation, the launchers of
// gsrender/launch/sh.h (kernels in csrc/cuda/sh_kernel.cu).
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>

#include "cuda_glue.h"
#include "gsrender/launch/sh.h"
#include "gsrender/project_sh_checks.h"

namespace gsrender {
namespace {

using at::Tensor;

Tensor sh_fwd_cuda(int64_t degree, const Tensor& dirs, const Tensor& coeffs) {
  check_sh_inputs(degree, dirs, coeffs);
  const c10::cuda::CUDAGuard guard(dirs.device());
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  const Tensor dirs_c = dirs.contiguous(), coeffs_c = coeffs.contiguous();
  Tensor colors = at::empty({C, N, 3}, dirs.options());  // [C, N, 3]
  AT_DISPATCH_FLOATING_TYPES(dirs.scalar_type(), "sh_fwd_cuda", [&] {
    using T = scalar_t;
    const launch::ShFwdArgs<T> a{static_cast<int>(degree), C, N, K, dirs_c.data_ptr<T>(),
                                 coeffs_c.data_ptr<T>(), colors.data_ptr<T>()};
    C10_CUDA_CHECK(launch::launch_sh_fwd(a, gpu::current_stream()));
  });
  return colors;
}

std::tuple<Tensor, Tensor> sh_bwd_cuda(int64_t degree, const Tensor& dirs, const Tensor& coeffs,
                                       const Tensor& v_colors) {
  check_sh_inputs(degree, dirs, coeffs);
  check_sh_grads(dirs, v_colors);
  const c10::cuda::CUDAGuard guard(dirs.device());
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  const Tensor dirs_c = dirs.contiguous(), coeffs_c = coeffs.contiguous(),
               v_colors_c = v_colors.contiguous();
  Tensor v_dirs = at::empty({C, N, 3}, dirs.options());     // [C, N, 3]
  Tensor v_coeffs = at::zeros({N, K, 3}, dirs.options());  // [N, K, 3], 0 for k >= (deg+1)^2
  AT_DISPATCH_FLOATING_TYPES(dirs.scalar_type(), "sh_bwd_cuda", [&] {
    using T = scalar_t;
    const launch::ShBwdArgs<T> a{static_cast<int>(degree), C, N, K,
                                 dirs_c.data_ptr<T>(),     coeffs_c.data_ptr<T>(),
                                 v_colors_c.data_ptr<T>(), v_dirs.data_ptr<T>(),
                                 v_coeffs.data_ptr<T>()};
    C10_CUDA_CHECK(launch::launch_sh_bwd(a, gpu::current_stream()));
  });
  return {v_dirs, v_coeffs};
}

}  // namespace
}  // namespace gsrender

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) {
  m.impl("sh_fwd", &gsrender::sh_fwd_cuda);
  m.impl("sh_bwd", &gsrender::sh_bwd_cuda);
}
