// rasterize_fwd's CPU op: checks its arguments, plans the kernel, allocates the outputs and runs
// rasterize_fwd_kernel.cpp's tiles (the kernels' translation unit includes no torch header).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binning_check.h"
#include "gaussian_array.h"
#include "gsrender/raster_interface.h"
#include "cpu/rasterize_fwd_kernel.h"

namespace gsrender {
namespace cpu {
namespace {

RasterFwdResult rasterize_fwd_cpu(
    const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& opacities,
    const at::Tensor& colors, const at::Tensor& depths,
    const c10::optional<at::Tensor>& backgrounds, const at::Tensor& tile_offsets,
    const at::Tensor& flatten_ids, int64_t width, int64_t height, int64_t tile_size, int64_t mode,
    at::ArrayRef<double> weight_params, c10::string_view precision, bool deterministic) {
  const RasterInputs in =
      check_raster_inputs(means2d, conics, opacities, colors, depths, backgrounds, tile_offsets,
                          flatten_ids, width, height, tile_size, mode, weight_params);
  const RasterPlan plan =
      plan_rasterize(precision, mode, deterministic, cpu_raster_target(means2d, tile_size), in.grid);
  const bool scalar = plan.forward == RasterKernel::kScalar;
  check_binning(in);
  note_cpu_render();
  const int64_t C = means2d.size(0), CH = colors.size(2);
  const auto [render, alphas, last_ids, aux, stats] =
      empty_raster_outputs(C, height, width, CH, means2d.options());
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "rasterize_fwd_cpu", [&] {
    using T = scalar_t;
    const RasterArgs<T> a = make_raster_args<T>(in, width, height, mode, weight_params);
    const FwdOut<T> o{render.data_ptr<T>(), alphas.data_ptr<T>(), last_ids.data_ptr<int32_t>(),
                      aux.data_ptr<T>(), stats.data_ptr<int64_t>()};
    const GaussianArray<T> gs = scalar ? GaussianArray<T>() : GaussianArray<T>(a.C * a.N);
    rasterize_fwd_tiles<T>(a, o, scalar ? nullptr : gs.data(), plan.grid.count);
  });
  return {render, alphas, last_ids, aux, stats, plan_tensor(plan)};
}

}  // namespace
}  // namespace cpu

TORCH_LIBRARY_IMPL(gsrender, CPU, m) { m.impl("rasterize_fwd", &cpu::rasterize_fwd_cpu); }

}  // namespace gsrender
