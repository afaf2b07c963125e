// CUDA backward rasterizer, the scalar kernel (3DGS/gsplat style; the f16/bf16 impls take the
// Tensor Core backward of rasterize_mma_bwd.cu where it applies): one block per tile, one
// thread per pixel, the tile's list walked back to front from the block's largest last_ids in
// shared-memory batches. The gradient formulas are those of csrc/cpu/rasterize_bwd.cpp:
//   sorted:   dα_k = T_k·dW_k − S_k/(1 − α_k), S carried back to front, seeded with
//             T_final·(G·bg − v_alpha), then S += w_k·dW_k;
//   weighted: g = v_render / (Σw + w_bg), dα_k = (dW_k − g·OUT)·φ_k + v_alpha·T_final/(1 − α_k),
//             v_depth_k = (dW_k − g·OUT)·α_k·φ'(z_k),
// with dW_k = g·f_k and v_colors_k += w_k·g, then AlphaGrad (gsrender/alpha.h) to the 2D
// parameters. The transmittance before each Gaussian is recovered by division,
// T_k = T_{k+1} / (1 − α_k) starting from T_final (3DGS's choice: one pass, no forward replay;
// α ≤ 0.99 keeps each division well conditioned, and the CPU replays the forward instead, which
// agrees to rounding). Per-Gaussian sums are reduced over each warp (__shfl_down_sync) and added
// with one atomicAdd per warp; a warp skips a Gaussian none of its pixels uses.
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>

#include "raster_common.cuh"
#include "rasterize_mma.cuh"

namespace gsrender {
namespace gpu {
namespace {

using at::Tensor;

template <typename T>
__global__ void __launch_bounds__(kMaxThreads, 1)
    rasterize_bwd_kernel(const RasterArgs<T> p, const RasterBwdIO<T> io) {
  __shared__ Stage<T> s;
  __shared__ int32_t s_stop;
  const TileRun run = tile_run(p, blockIdx.x);
  const ThreadPixel px = thread_pixel(p, run);
  const T pcx = px.x + T(0.5), pcy = px.y + T(0.5);
  const int64_t CH = p.CH;
  const T* bg = p.backgrounds ? p.backgrounds + run.cam * CH : nullptr;

  // Per-pixel state. g = scale·v_render is the gradient of the normalised output: scale 1 when
  // sorted, 1/(Σw + w_bg) when weighted.
  int32_t last = run.start;
  T t_final = T(0), tr = T(0), acc = T(0), v_alpha = T(0), scale = T(0), g_out = T(0);
  const T* vr = nullptr;
  if (px.inside) {
    last = io.last_ids[px.pix];
    v_alpha = io.v_alphas[px.pix];
    vr = io.v_render + px.pix * CH;
    if (p.sorted) {
      t_final = io.aux[px.pix];
      tr = t_final;
      scale = T(1);
      T g_bg = T(0);
      if (bg)
        for (int64_t c = 0; c < CH; ++c) g_bg += vr[c] * bg[c];
      acc = t_final * (g_bg - v_alpha);  // suffix-sum seed: background and alpha-output terms
    } else {
      t_final = T(1) - io.alphas[px.pix];
      scale = T(1) / io.aux[px.pix];
      const T* out = io.render + px.pix * CH;
      for (int64_t c = 0; c < CH; ++c) g_out += vr[c] * scale * out[c];
    }
  }

  if (bg) {  // v_backgrounds: sorted T_final·v_render, weighted w_bg·g
    const T k = p.sorted ? t_final : p.w_bg * scale;
    T* vbg = io.v_backgrounds + run.cam * CH;
    for (int64_t c = 0; c < CH; ++c) warp_add(vbg + c, px.inside ? k * vr[c] : T(0));
  }

  // The walk ends at the block's largest last_ids (sorted mode's early stop; the tile end in
  // weighted mode, where last_ids is the tile end).
  if (threadIdx.x == 0) s_stop = run.start;
  __syncthreads();
  if (px.inside) atomicMax(&s_stop, last);
  __syncthreads();
  const int32_t stop = s_stop;
  const int nthreads = static_cast<int>(blockDim.x);

  for (int32_t b1 = stop; b1 > run.start; b1 -= nthreads) {
    const int32_t b0 = max(run.start, b1 - nthreads);
    const int n = b1 - b0;
    __syncthreads();  // the previous batch is fully read
    if (static_cast<int>(threadIdx.x) < n)
      stage_gaussian(s, threadIdx.x, p, p.flatten_ids[b0 + static_cast<int32_t>(threadIdx.x)]);
    __syncthreads();
    for (int j = n - 1; j >= 0; --j) {
      const T dx = s.mx[j] - pcx, dy = s.my[j] - pcy;
      const T alpha = px.inside && b0 + j < last
                          ? pair_alpha<T>(s.opacity[j], gaussian_sigma<T>(s.a[j], s.b[j],
                                                                          s.c[j], dx, dy))
                          : T(0);
      const bool valid = alpha != T(0);
      if (!__any_sync(0xffffffffu, valid)) continue;  // warp-uniform
      const int64_t id = s.id[j];
      const T om = T(1) - alpha;
      T w = T(0), t_before = T(0);
      if (valid) {
        if (p.sorted) {
          t_before = tr / om;
          w = alpha * t_before;
        } else {
          w = alpha * s.phi[j];
        }
      }
      // One pass over the channels: dW = g·f, and the warp's share of v_colors += w·g.
      const T* f = p.colors + id * CH;
      T* vc = io.v_colors + id * CH;
      T dw = T(0);
      for (int64_t c = 0; c < CH; ++c) {
        const T gc = px.inside ? vr[c] * scale : T(0);
        dw += gc * f[c];
        warp_add(vc + c, w * gc);
      }
      AlphaGrad<T> ag;
      T v_depth = T(0);
      if (valid) {
        T v_al;
        if (p.sorted) {
          v_al = t_before * dw - acc / om;
          acc += w * dw;
          tr = t_before;
        } else {
          const T dw_net = dw - g_out;  // d(N/S)/dw = (f − OUT)/S, with g already divided by S
          v_al = dw_net * s.phi[j] + v_alpha * t_final / om;
          v_depth = dw_net * alpha * depth_weight_dz<T>(p.depths[id], s.phi[j], p.sigma_w, p.beta);
        }
        ag.add(v_al, alpha, s.opacity[j], s.a[j], s.b[j], s.c[j], dx, dy);
      }
      warp_add(io.v_means2d + 2 * id, ag.v_mean_x);
      warp_add(io.v_means2d + 2 * id + 1, ag.v_mean_y);
      warp_add(io.v_conics + 3 * id, ag.v_a);
      warp_add(io.v_conics + 3 * id + 1, ag.v_b);
      warp_add(io.v_conics + 3 * id + 2, ag.v_c);
      warp_add(io.v_opacities + id, ag.v_opacity);
      if (!p.sorted) warp_add(io.v_depths + id, v_depth);
    }
  }
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> rasterize_bwd_cuda(
    const Tensor& means2d, const Tensor& conics, const Tensor& opacities, const Tensor& colors,
    const Tensor& depths, const c10::optional<Tensor>& backgrounds, const Tensor& tile_offsets,
    const Tensor& flatten_ids, int64_t width, int64_t height, int64_t tile_size, int64_t mode,
    at::ArrayRef<double> weight_params, const Tensor& render, const Tensor& alphas,
    const Tensor& last_ids, const Tensor& aux, const Tensor& v_render, const Tensor& v_alphas,
    int64_t impl) {
  const RasterInputs in =
      check_raster_inputs(means2d, conics, opacities, colors, depths, backgrounds, tile_offsets,
                          flatten_ids, width, height, tile_size, mode, weight_params);
  check_raster_grads(in, width, height, render, alphas, last_ids, aux, v_render, v_alphas);
  check_raster_impl(impl);
  check_cuda_tile_size(tile_size);
  const c10::cuda::CUDAGuard guard(means2d.device());
  validate_binning_cuda(in, &last_ids, width, height, tile_size);
  const RasterBwdTensors bufs =
      prepare_raster_bwd(in, render, alphas, last_ids, aux, v_render, v_alphas);
  const int64_t n_tiles = in.tile_offsets.numel();
  if (n_tiles == 0)
    return bufs.grads();
  TORCH_CHECK_VALUE(n_tiles < INT32_MAX, "rasterize_bwd: ", n_tiles, " tiles exceed the grid");
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  if (mma_backward_applies(means2d, tile_size, impl)) {
    launch_rasterize_mma_bwd(make_raster_args<float>(in, width, height, tile_size, mode,
                                                     weight_params),
                             in.colors, bufs, impl, n_tiles, stream);
    return bufs.grads();
  }
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "rasterize_bwd_cuda", [&] {
    using T = scalar_t;
    const RasterArgs<T> p = make_raster_args<T>(in, width, height, tile_size, mode,
                                                     weight_params);
    const RasterBwdIO<T> io = bufs.io<T>();
    rasterize_bwd_kernel<T><<<static_cast<unsigned>(n_tiles), raster_threads(tile_size), 0,
                              stream>>>(p, io);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return bufs.grads();
}

}  // namespace
}  // namespace gpu

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) { m.impl("rasterize_bwd", &gpu::rasterize_bwd_cuda); }

}  // namespace gsrender
