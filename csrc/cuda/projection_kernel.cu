// CUDA kernels of project_fwd / project_bwd, running the same per-pair math as the CPU backend
// (gsrender/projection.h): the forward one thread per (camera, Gaussian), the backward one
// thread per Gaussian walking the cameras in order (deterministic, see project_bwd_kernel).
// Both are compiled per lens model (CameraModel); the launchers pick one.
#include "gsrender/launch/projection.h"
#include "gsrender/projection.h"

namespace gsrender {
namespace {

constexpr int kThreads = 256;  // a multiple of 32: the backward reduces whole warps
constexpr int kWarps = kThreads / 32;
constexpr int kViewGrads = 12;  // rows 0..2 of the 4×4 viewmat gradient

template <typename T, int Model>
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
      project_gaussian<Model>(load_vec3(means + 3 * n), Vec4<T>{q[0], q[1], q[2], q[3]},
                              load_vec3(scales + 3 * n), opacities[n], cam, eps2d, near_plane,
                              far_plane, radius_clip, antialiased);
  store_projected(r, idx, radii, means2d, depths, conics, opacities2d);
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

// One thread per Gaussian n, walking the cameras in order as csrc/cpu/projection_kernel.cpp does: its
// v_means/v_quats/v_scales/v_opacities have one writer and a fixed summation order, and each
// camera's v_viewmats share is reduced over the block (fixed order) into view_partial
// [blocks, C, kViewGrads], summed over blocks in block order by view_sum_kernel. No float
// atomics, so the backward is deterministic.
template <typename T, int Model>
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
      const ProjectGrads<T> g = project_gaussian_bwd<Model>(
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

}  // namespace

namespace launch {

template <typename T>
cudaError_t launch_project_fwd(const ProjectFwdArgs<T>& a, cudaStream_t stream) {
  if (a.C * a.N == 0) return cudaSuccess;
  with_camera_model(a.camera_model, [&](auto lens) {
    GSR_LAUNCH(num_blocks(a.C * a.N), kThreads, 0, stream,
               project_fwd_kernel<T, decltype(lens)::value>)(
        a.C, a.N, a.means, a.quats, a.scales, a.opacities, a.viewmats, a.Ks, a.width, a.height,
        a.eps2d, a.near_plane, a.far_plane, a.radius_clip, a.antialiased, a.radii, a.means2d,
        a.depths, a.conics, a.opacities2d);
  });
  return cudaGetLastError();
}

// view_partial [blocks, C, kViewGrads]
template <typename T>
size_t project_bwd_workspace_bytes(const ProjectBwdArgs<T>& a) {
  Carver c(nullptr);
  c.take<T>(num_blocks(a.N) * a.C * kViewGrads);
  return c.used();
}

template <typename T>
cudaError_t launch_project_bwd(const ProjectBwdArgs<T>& a, Workspace ws, cudaStream_t stream) {
  if (a.C * a.N == 0) return cudaSuccess;
  if (ws.bytes < project_bwd_workspace_bytes(a)) return cudaErrorInvalidValue;
  const int64_t blocks = num_blocks(a.N);
  Carver c(ws.ptr);
  T* view_partial = c.take<T>(blocks * a.C * kViewGrads);
  with_camera_model(a.camera_model, [&](auto lens) {
    GSR_LAUNCH(static_cast<unsigned>(blocks), kThreads, 0, stream,
               project_bwd_kernel<T, decltype(lens)::value>)(
        a.C, a.N, a.means, a.quats, a.scales, a.opacities, a.viewmats, a.Ks, a.width, a.height,
        a.eps2d, a.antialiased, a.radii, a.v_means2d, a.v_depths, a.v_conics, a.v_opacities2d,
        a.v_means, a.v_quats, a.v_scales, a.v_opacities, view_partial);
  });
  GSR_CUDA_TRY(cudaGetLastError());
  GSR_LAUNCH(static_cast<unsigned>(num_blocks(a.C * kViewGrads)), kThreads, 0, stream, view_sum_kernel<T>)(
      view_partial, blocks, a.C, a.v_viewmats);
  return cudaGetLastError();
}

#define GSR_INSTANTIATE(T)                                                                 \
  template cudaError_t launch_project_fwd<T>(const ProjectFwdArgs<T>&, cudaStream_t);      \
  template size_t project_bwd_workspace_bytes<T>(const ProjectBwdArgs<T>&);                \
  template cudaError_t launch_project_bwd<T>(const ProjectBwdArgs<T>&, Workspace, cudaStream_t);
GSR_INSTANTIATE(float)
GSR_INSTANTIATE(double)
#undef GSR_INSTANTIATE

}  // namespace launch
}  // namespace gsrender
