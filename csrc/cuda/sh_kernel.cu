// CUDA kernels of sh_fwd / sh_bwd, running the same per-pair math as the CPU backend
// (gsrender/sh.h): the forward one thread per (camera, Gaussian), the backward one thread per
// Gaussian walking the cameras in order, as csrc/cpu/sh_kernel.cpp does, so each v_coeffs row has
// one writer and its sum over cameras a fixed order (no float atomics: deterministic).
#include "gsrender/launch/sh.h"
#include "gsrender/sh.h"

namespace gsrender {
namespace {

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

}  // namespace

namespace launch {

template <typename T>
cudaError_t launch_sh_fwd(const ShFwdArgs<T>& a, cudaStream_t stream) {
  if (a.C * a.N == 0) return cudaSuccess;
  GSR_LAUNCH(num_blocks(a.C * a.N), kThreads, 0, stream, sh_fwd_kernel<T>)(a.degree, a.C, a.N, a.K,
                                                                    a.dirs, a.coeffs, a.colors);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_sh_bwd(const ShBwdArgs<T>& a, cudaStream_t stream) {
  if (a.C * a.N == 0) return cudaSuccess;
  GSR_LAUNCH(num_blocks(a.N), kThreads, 0, stream, sh_bwd_kernel<T>)(
      a.degree, a.C, a.N, a.K, a.dirs, a.coeffs, a.v_colors, a.v_dirs, a.v_coeffs);
  return cudaGetLastError();
}

template cudaError_t launch_sh_fwd<float>(const ShFwdArgs<float>&, cudaStream_t);
template cudaError_t launch_sh_fwd<double>(const ShFwdArgs<double>&, cudaStream_t);
template cudaError_t launch_sh_bwd<float>(const ShBwdArgs<float>&, cudaStream_t);
template cudaError_t launch_sh_bwd<double>(const ShBwdArgs<double>&, cudaStream_t);

}  // namespace launch
}  // namespace gsrender
