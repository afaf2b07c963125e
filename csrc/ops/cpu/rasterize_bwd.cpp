// rasterize_bwd's CPU op: checks its arguments, allocates the gradients and runs
// rasterize_bwd_kernel.cpp (the backward itself: how it works is written there); with
// deterministic=true it plans the fixed-order reduction (an ATen sort) and allocates each
// pass's rows here.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <atomic>

#include "binning_check.h"
#include "gaussian_array.h"
#include "gsrender/det_reduce.h"
#include "gsrender/raster_interface.h"
#include "cpu/rasterize_bwd_kernel.h"

namespace gsrender {
namespace cpu {
namespace {

// deterministic=true (gsrender/det_reduce.h): the plan, then per pass of channels its zeroed
// rows of part for backward_det_pass (and, first pass, the per-tile v_backgrounds rows).
template <typename T>
void backward_deterministic(const RasterArgs<T>& a, const RowGaussian<T>* gs,
                            const RasterBwdIO<T>& io,
                            const at::Tensor& flatten_ids, bool has_bg) {
  const int64_t CH = a.CH, n_tiles = a.C * int64_t(a.TH) * a.TW, G = a.C * a.N;
  const DetPlan plan = make_det_plan(flatten_ids, G, CH, sizeof(T));
  const int64_t* order = plan.order.data_ptr<int64_t>();
  const int64_t* seg = plan.seg.data_ptr<int64_t>();
  const auto opts = at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value);
  at::Tensor bg_part = at::zeros({has_bg ? n_tiles : 0, CH}, opts);  // [tiles, CH]
  T* bgp = bg_part.data_ptr<T>();
  for (int64_t c0 = 0; c0 < std::max<int64_t>(CH, 1); c0 += plan.chunk) {
    const DetPass ps = plan.pass(c0, CH);
    at::Tensor part_t = at::zeros({a.M, ps.stride}, opts);  // [M, kDetFields + nc]
    backward_det_pass<T>(a, gs, io, ps, order, seg, part_t.data_ptr<T>(),
                         has_bg && ps.first ? bgp : nullptr);
  }
  if (has_bg) det_backgrounds<T>(a, bgp, io);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
rasterize_bwd_cpu(const at::Tensor& means2d, const at::Tensor& conics,
                  const at::Tensor& opacities, const at::Tensor& colors, const at::Tensor& depths,
                  const c10::optional<at::Tensor>& backgrounds, const at::Tensor& tile_offsets,
                  const at::Tensor& flatten_ids, int64_t width, int64_t height, int64_t tile_size,
                  int64_t mode, at::ArrayRef<double> weight_params, const at::Tensor& render,
                  const at::Tensor& alphas, const at::Tensor& last_ids, const at::Tensor& aux,
                  const at::Tensor& v_render, const at::Tensor& v_alphas,
                  const at::Tensor& plan) {
  const RasterInputs in =
      check_raster_inputs(means2d, conics, opacities, colors, depths, backgrounds, tile_offsets,
                          flatten_ids, width, height, tile_size, mode, weight_params);
  check_binning(in);
  const int64_t C = means2d.size(0);
  const auto dt = means2d.scalar_type();
  check_raster_grads(in, width, height, render, alphas, last_ids, aux, v_render, v_alphas);
  const bool deterministic =
      planned_backward(plan, mode, cpu_raster_target(means2d, tile_size), in.grid).backward ==
      RasterKernel::kMatrixDet;
  const auto last_c = last_ids.contiguous();
  {  // each pixel's last_ids must lie inside its own tile's run (the backward indexes by it);
     // checked row by row in parallel (one thread walked every pixel of the step's images)
    const int32_t* l = last_c.data_ptr<int32_t>();
    const int32_t* off = in.tile_offsets.data_ptr<int32_t>();
    const int64_t TH = in.grid.tiles_y, TW = in.grid.tiles_x;
    const int64_t M = flatten_ids.numel();
    std::atomic<bool> ok{true};
    at::parallel_for(0, C * height, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t cy = r0; cy < r1; ++cy) {
        const int64_t row_tile = (cy / height * TH + cy % height / tile_size) * TW;
        for (int64_t x = 0; x < width; ++x) {
          const int64_t t = row_tile + x / tile_size;
          const int64_t start = off[t], end = t + 1 < in.grid.count ? off[t + 1] : M;
          const int32_t v = l[cy * width + x];
          if (v < start || v > end) ok.store(false, std::memory_order_relaxed);
        }
      }
    });
    TORCH_CHECK_VALUE(ok.load(), "last_ids must lie inside each pixel's tile run (as "
                                 "rasterize_fwd returns it)");
  }
  const RasterBwdTensors bufs =
      prepare_raster_bwd(in, render, alphas, last_c, aux, v_render, v_alphas);
  const bool has_bg = backgrounds.has_value() && backgrounds->defined();
  AT_DISPATCH_FLOATING_TYPES(dt, "rasterize_bwd_cpu", [&] {
    using T = scalar_t;
    const RasterArgs<T> a = make_raster_args<T>(in, width, height, mode, weight_params);
    const GaussianArray<T> gs(a.C * a.N);
    prepare_bwd_gaussians(a, gs.data());
    if (deterministic)
      backward_deterministic<T>(a, gs.data(), bufs.io<T>(), in.flatten_ids, has_bg);
    else
      TORCH_CHECK(backward_chunked<T>(a, gs.data(), bufs.io<T>()),
                  "rasterize_bwd (CPU): a tile touched a Gaussian outside the chunks its support "
                  "box spans (an internal error)");
  });
  if (!has_bg) bufs.v_backgrounds.zero_();
  return bufs.grads();
}

}  // namespace
}  // namespace cpu

TORCH_LIBRARY_IMPL(gsrender, CPU, m) { m.impl("rasterize_bwd", &cpu::rasterize_bwd_cpu); }

}  // namespace gsrender
