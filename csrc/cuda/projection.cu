// CUDA kernels of project_fwd / project_bwd, running the same per-pair math as the CPU backend
// (gsrender/projection.h): the forward one thread per (camera, Gaussian), the backward one
// thread per Gaussian walking the cameras in order (deterministic, see project_bwd_kernel).
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <tuple>

#include "gsrender/project_sh_checks.h"
#include "gsrender/projection.h"

namespace gsrender {
namespace {

using at::Tensor;

constexpr int kThreads = 256;  // a multiple of 32: the backward reduces whole warps
constexpr int kWarps = kThreads / 32;
constexpr int kViewGrads = 12;  // rows 0..2 of the 4×4 viewmat gradient

template <typename T>
__global__ void project_fwd_kernel(int64_t C, int64_t N, const T* __restrict__ means,
                                   const T* __restrict__ quats, const T* __restrict__ scales,
                                   const T* __restrict__ opacities,
                                   const T* __restrict__ viewmats, const T* __restrict__ Ks,
                                   int width, int height, T eps2d, T near_plane, T far_plane,
                                   T radius_clip, bool antialiased, int32_t* __restrict__ radii,
                                   T* __restrict__ means2d, T* __restrict__ depths,
                                   T* __restrict__ conics, T* __restrict__ opacities2d) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= C * N) return;
  const int64_t c = idx / N, n = idx % N;
  const Camera<T> cam = load_camera(viewmats + 16 * c, Ks + 9 * c, width, height);
  const T* q = quats + 4 * n;
  const Projected<T> r =
      project_gaussian(load_vec3(means + 3 * n), Vec4<T>{q[0], q[1], q[2], q[3]},
                       load_vec3(scales + 3 * n), opacities[n], cam, eps2d, near_plane,
                       far_plane, radius_clip, antialiased);
  radii[2 * idx] = r.radius_x;
  radii[2 * idx + 1] = r.radius_y;
  means2d[2 * idx] = r.mean2d.x;
  means2d[2 * idx + 1] = r.mean2d.y;
  depths[idx] = r.depth;
  conics[3 * idx] = r.conic.a;
  conics[3 * idx + 1] = r.conic.b;
  conics[3 * idx + 2] = r.conic.c;
  opacities2d[idx] = r.opacity2d;
}

// Sums vals over the thread block in a fixed order (each warp's shuffle tree, then the warps in
// order) into dst[0..kViewGrads); every thread must call it.
template <typename T>
__device__ __forceinline__ void block_reduce_store(T (&vals)[kViewGrads], T* dst) {
  __shared__ T partial[kWarps][kViewGrads];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int e = 0; e < kViewGrads; ++e) {
    T v = vals[e];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) partial[warp][e] = v;
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int e = 0; e < kViewGrads; ++e) {
      T v = lane < kWarps ? partial[lane][e] : T(0);
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
      if (lane == 0) dst[e] = v;
    }
  }
  __syncthreads();  // partial is free for the next call
}

// One thread per Gaussian n, walking the cameras in order as csrc/cpu/projection.cpp does: its
// v_means/v_quats/v_scales/v_opacities have one writer and a fixed summation order, and each
// camera's v_viewmats share is reduced over the block (fixed order) into view_partial
// [blocks, C, kViewGrads], summed over blocks in block order by view_sum_kernel. No float
// atomics, so the backward is deterministic (issue 3).
template <typename T>
__global__ void __launch_bounds__(kThreads) project_bwd_kernel(
    int64_t C, int64_t N, const T* __restrict__ means, const T* __restrict__ quats,
    const T* __restrict__ scales, const T* __restrict__ opacities,
    const T* __restrict__ viewmats, const T* __restrict__ Ks, int width, int height, T eps2d,
    bool antialiased, const int32_t* __restrict__ radii, const T* __restrict__ v_means2d,
    const T* __restrict__ v_depths, const T* __restrict__ v_conics,
    const T* __restrict__ v_opacities2d, T* __restrict__ v_means, T* __restrict__ v_quats,
    T* __restrict__ v_scales, T* __restrict__ v_opacities, T* __restrict__ view_partial) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = n < N;  // no early return: every thread takes part in the block reductions
  Vec3<T> mean{}, scale{}, g_mean{}, g_scale{};
  Vec4<T> quat{}, g_quat{};
  T g_opac = T(0);
  if (active) {
    const T* q = quats + 4 * n;
    mean = load_vec3(means + 3 * n), scale = load_vec3(scales + 3 * n);
    quat = Vec4<T>{q[0], q[1], q[2], q[3]};
  }
  for (int64_t c = 0; c < C; ++c) {
    T view_grad[kViewGrads];
#pragma unroll
    for (int e = 0; e < kViewGrads; ++e) view_grad[e] = T(0);
    const int64_t idx = c * N + n;
    if (active && (radii[2 * idx] > 0 || radii[2 * idx + 1] > 0)) {  // culled: zero gradient
      const Camera<T> cam = load_camera(viewmats + 16 * c, Ks + 9 * c, width, height);
      const ProjectGrads<T> g = project_gaussian_bwd(
          mean, quat, scale, opacities[n], cam, eps2d, antialiased,
          Vec2<T>{v_means2d[2 * idx], v_means2d[2 * idx + 1]}, v_depths[idx],
          Sym2<T>{v_conics[3 * idx], v_conics[3 * idx + 1], v_conics[3 * idx + 2]},
          v_opacities2d[idx]);
      g_mean = g_mean + g.v_mean;
      g_quat = Vec4<T>{g_quat.w + g.v_quat.w, g_quat.x + g.v_quat.x, g_quat.y + g.v_quat.y,
                       g_quat.z + g.v_quat.z};
      g_scale = g_scale + g.v_scale;
      g_opac += g.v_opacity;
      const T vt[3] = {g.v_t.x, g.v_t.y, g.v_t.z};
#pragma unroll
      for (int i = 0; i < 3; ++i) {
#pragma unroll
        for (int j = 0; j < 3; ++j) view_grad[4 * i + j] = g.v_R.m[i][j];
        view_grad[4 * i + 3] = vt[i];
      }
    }
    block_reduce_store(view_grad, view_partial + (blockIdx.x * C + c) * kViewGrads);
  }
  if (!active) return;
  store_vec3(v_means + 3 * n, g_mean);
  v_quats[4 * n] = g_quat.w, v_quats[4 * n + 1] = g_quat.x;
  v_quats[4 * n + 2] = g_quat.y, v_quats[4 * n + 3] = g_quat.z;
  store_vec3(v_scales + 3 * n, g_scale);
  v_opacities[n] = g_opac;
}

// One thread per (camera, entry): rows 0..2 of v_viewmats[c], the blocks' shares in block order.
template <typename T>
__global__ void view_sum_kernel(const T* __restrict__ view_partial, int64_t blocks, int64_t C,
                                T* __restrict__ v_viewmats) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= C * kViewGrads) return;
  const int64_t c = idx / kViewGrads, e = idx % kViewGrads;
  T sum = T(0);
  for (int64_t b = 0; b < blocks; ++b) sum += view_partial[(b * C + c) * kViewGrads + e];
  v_viewmats[16 * c + e] = sum;
}

int64_t num_blocks(int64_t n) { return (n + kThreads - 1) / kThreads; }

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> project_fwd_cuda(
    const Tensor& means, const Tensor& quats, const Tensor& scales, const Tensor& opacities,
    const Tensor& viewmats, const Tensor& Ks, int64_t width, int64_t height, double eps2d,
    double near_plane, double far_plane, double radius_clip, bool antialiased) {
  const auto [C, N, means_c, quats_c, scales_c, opacities_c, viewmats_c, Ks_c] =
      prepare_project_inputs(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d);
  const auto [radii, means2d, depths, conics, opacities2d] =
      empty_project_outputs(C, N, means.options());
  const c10::cuda::CUDAGuard guard(means.device());
  if (C * N == 0) return {radii, means2d, depths, conics, opacities2d};

  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "project_fwd_cuda", [&] {
    using T = scalar_t;
    project_fwd_kernel<T><<<num_blocks(C * N), kThreads, 0, stream>>>(
        C, N, means_c.data_ptr<T>(), quats_c.data_ptr<T>(), scales_c.data_ptr<T>(),
        opacities_c.data_ptr<T>(), viewmats_c.data_ptr<T>(), Ks_c.data_ptr<T>(),
        static_cast<int>(width), static_cast<int>(height), T(eps2d), T(near_plane),
        T(far_plane), T(radius_clip), antialiased, radii.data_ptr<int32_t>(),
        means2d.data_ptr<T>(), depths.data_ptr<T>(), conics.data_ptr<T>(),
        opacities2d.data_ptr<T>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {radii, means2d, depths, conics, opacities2d};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> project_bwd_cuda(
    const Tensor& means, const Tensor& quats, const Tensor& scales, const Tensor& opacities,
    const Tensor& viewmats, const Tensor& Ks, int64_t width, int64_t height, double eps2d,
    bool antialiased, const Tensor& radii, const Tensor& v_means2d, const Tensor& v_depths,
    const Tensor& v_conics, const Tensor& v_opacities2d) {
  const auto [C, N, means_c, quats_c, scales_c, opacities_c, viewmats_c, Ks_c] =
      prepare_project_inputs(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d);
  const auto [radii_c, v_means2d_c, v_depths_c, v_conics_c, v_opacities2d_c] =
      prepare_project_grads(means, C, N, radii, v_means2d, v_depths, v_conics, v_opacities2d);
  const c10::cuda::CUDAGuard guard(means.device());
  const auto [v_means, v_quats, v_scales, v_opacities, v_viewmats] =
      zero_project_grads(C, N, means.options());
  if (C * N == 0) return {v_means, v_quats, v_scales, v_opacities, v_viewmats};

  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const int64_t blocks = num_blocks(N);
  const Tensor view_partial = at::empty({blocks, C, kViewGrads}, means.options());
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "project_bwd_cuda", [&] {
    using T = scalar_t;
    project_bwd_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        C, N, means_c.data_ptr<T>(), quats_c.data_ptr<T>(), scales_c.data_ptr<T>(),
        opacities_c.data_ptr<T>(), viewmats_c.data_ptr<T>(), Ks_c.data_ptr<T>(),
        static_cast<int>(width), static_cast<int>(height), T(eps2d), antialiased,
        radii_c.data_ptr<int32_t>(), v_means2d_c.data_ptr<T>(), v_depths_c.data_ptr<T>(),
        v_conics_c.data_ptr<T>(), v_opacities2d_c.data_ptr<T>(), v_means.data_ptr<T>(),
        v_quats.data_ptr<T>(), v_scales.data_ptr<T>(), v_opacities.data_ptr<T>(),
        view_partial.data_ptr<T>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    view_sum_kernel<T><<<static_cast<unsigned>(num_blocks(C * kViewGrads)), kThreads, 0, stream>>>(
        view_partial.data_ptr<T>(), blocks, C, v_viewmats.data_ptr<T>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {v_means, v_quats, v_scales, v_opacities, v_viewmats};
}

}  // namespace
}  // namespace gsrender

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) {
  m.impl("project_fwd", &gsrender::project_fwd_cuda);
  m.impl("project_bwd", &gsrender::project_bwd_cuda);
}
