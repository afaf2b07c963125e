// CUDA kernels of sh_fwd / sh_bwd, running the same per-pair math as the CPU backend
// (gsrender/sh.h): the forward one thread per (camera, Gaussian), the backward one thread per
// Gaussian walking the cameras in order, as csrc/cpu/sh.cpp does, so each v_coeffs row has one
// writer and its sum over cameras a fixed order (no float atomics: deterministic, issue 3).
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <tuple>

#include "gsrender/project_sh_checks.h"
#include "gsrender/sh.h"

namespace gsrender {
namespace {

using at::Tensor;

constexpr int kThreads = 256;

int64_t num_blocks(int64_t n) { return (n + kThreads - 1) / kThreads; }

template <typename T>
__global__ void sh_fwd_kernel(int degree, int64_t C, int64_t N, int64_t K,
                              const T* __restrict__ dirs, const T* __restrict__ coeffs,
                              T* __restrict__ colors) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= C * N) return;
  const int64_t n = idx % N;
  sh_eval(degree, load_vec3(dirs + 3 * idx), coeffs + n * K * 3, colors + 3 * idx);
}

// One thread per Gaussian n: v_coeffs (zero-initialised) row n summed over the cameras in order.
template <typename T>
__global__ void sh_bwd_kernel(int degree, int64_t C, int64_t N, int64_t K,
                              const T* __restrict__ dirs, const T* __restrict__ coeffs,
                              const T* __restrict__ v_colors, T* __restrict__ v_dirs,
                              T* __restrict__ v_coeffs) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  for (int64_t c = 0; c < C; ++c) {
    const int64_t idx = c * N + n;
    store_vec3(v_dirs + 3 * idx, sh_eval_bwd(degree, load_vec3(dirs + 3 * idx),
                                             coeffs + n * K * 3, v_colors + 3 * idx,
                                             v_coeffs + n * K * 3));
  }
}

Tensor sh_fwd_cuda(int64_t degree, const Tensor& dirs, const Tensor& coeffs) {
  check_sh_inputs(degree, dirs, coeffs);
  const c10::cuda::CUDAGuard guard(dirs.device());
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  const Tensor dirs_c = dirs.contiguous(), coeffs_c = coeffs.contiguous();
  Tensor colors = at::empty({C, N, 3}, dirs.options());  // [C, N, 3]
  if (C * N == 0) return colors;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(dirs.scalar_type(), "sh_fwd_cuda", [&] {
    using T = scalar_t;
    sh_fwd_kernel<T><<<num_blocks(C * N), kThreads, 0, stream>>>(
        static_cast<int>(degree), C, N, K, dirs_c.data_ptr<T>(), coeffs_c.data_ptr<T>(),
        colors.data_ptr<T>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
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
  if (C * N == 0) return {v_dirs, v_coeffs};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(dirs.scalar_type(), "sh_bwd_cuda", [&] {
    using T = scalar_t;
    sh_bwd_kernel<T><<<num_blocks(N), kThreads, 0, stream>>>(
        static_cast<int>(degree), C, N, K, dirs_c.data_ptr<T>(), coeffs_c.data_ptr<T>(),
        v_colors_c.data_ptr<T>(), v_dirs.data_ptr<T>(), v_coeffs.data_ptr<T>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {v_dirs, v_coeffs};
}

}  // namespace
}  // namespace gsrender

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) {
  m.impl("sh_fwd", &gsrender::sh_fwd_cuda);
  m.impl("sh_bwd", &gsrender::sh_bwd_cuda);
}
