// The ATen side of the rasterize ops' interface, shared by the CPU and CUDA backends (the CUDA
// files cannot include csrc/cpu/raster_tile.h, which pulls in the CPU SIMD helpers): argument
// checks, the validated inputs (RasterInputs), the launch plan as a tensor, the outputs and
// gradient buffers. The raw argument structs the kernels take live in the torch-free
// gsrender/raster_args.h, the plan's logic in gsrender/raster_plan.h.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <tuple>
#include <utility>

#include "gsrender/checks.h"
#include "gsrender/common.h"
#include "gsrender/host_alloc.h"
#include "gsrender/raster_args.h"
#include "gsrender/raster_plan.h"
#include "gsrender/tiles.h"

namespace gsrender {

// bin_tiles' arguments (both backends). conics and opacities come together (exact binning) or
// not at all (box binning).
inline void check_bin_tiles_inputs(const at::Tensor& means2d, const at::Tensor& radii,
                                   const at::Tensor& depths, int64_t width, int64_t height,
                                   int64_t tile_size, const c10::optional<at::Tensor>& conics,
                                   const c10::optional<at::Tensor>& opacities) {
  check_shape(means2d, "means2d", {-1, -1, 2});
  const int64_t C = means2d.size(0), N = means2d.size(1);
  check_floating(means2d, "means2d");
  check_shape(radii, "radii", {C, N, 2});
  check_int32(radii, "radii");
  check_shape(depths, "depths", {C, N});
  check_float(depths, "depths", means2d.scalar_type());
  check_device(radii, "radii", means2d.device());
  check_device(depths, "depths", means2d.device());
  check_image_size(width, height);
  TORCH_CHECK_VALUE(tile_size > 0 && tile_size <= 256, "tile_size must be in [1, 256], got ",
                    tile_size);
  TORCH_CHECK_VALUE(conics.has_value() == opacities.has_value(),
                    "bin_tiles: conics and opacities must be given together (exact binning) or "
                    "not at all, got ", conics ? "conics only" : "opacities only");
  if (!conics) return;
  check_shape(*conics, "conics", {C, N, 3});
  check_float(*conics, "conics", means2d.scalar_type());
  check_device(*conics, "conics", means2d.device());
  check_shape(*opacities, "opacities", {C, N});
  check_float(*opacities, "opacities", means2d.scalar_type());
  check_device(*opacities, "opacities", means2d.device());
}

// The CPU backend's target (gsrender/raster_plan.h); the CUDA glue adds the device's compute
// capability (cuda_glue.h).
inline RasterTarget cpu_raster_target(const at::Tensor& means2d, int64_t tile_size) {
  return {false, means2d.scalar_type() == at::kFloat, static_cast<int>(tile_size), 0};
}

// rasterize_fwd's plan from the user's precision string: the one choice of both kernels, on the
// inputs' tile grid (RasterInputs::grid).
inline RasterPlan plan_rasterize(c10::string_view precision, int64_t mode, bool deterministic,
                                 const RasterTarget& target, const TileGrid& grid) {
  RasterPrecision p{};
  TORCH_CHECK_VALUE(parse_raster_precision(precision.data(), precision.size(), &p),
                    "precision must be one of ", kRasterPrecisionChoices, ", got '",
                    std::string(precision.data(), precision.size()), "'");
  return make_raster_plan(p, mode == 0, deterministic, target, grid);
}

// The plan as rasterize_fwd returns it: [kPlanFields] int64 on the CPU (store_plan's layout), so
// that rasterize_bwd and Python read it without a device sync.
inline at::Tensor plan_tensor(const RasterPlan& plan) {
  at::Tensor t = at::empty({kPlanFields}, at::TensorOptions().dtype(at::kLong));
  store_plan(plan, t.data_ptr<int64_t>());
  return t;
}

// rasterize_bwd's `plan` (rasterize_fwd's output), checked against this call: its backward
// kernel runs on this target and mode, its tile grid is the inputs' (`grid`), its workspaces are
// sizes. A plan from elsewhere is refused, never re-decided.
inline RasterPlan planned_backward(const at::Tensor& plan, int64_t mode,
                                   const RasterTarget& target, const TileGrid& grid) {
  check_shape(plan, "plan", {kPlanFields});
  TORCH_CHECK_TYPE(plan.scalar_type() == at::kLong, "plan must have dtype int64, got ",
                   plan.scalar_type());
  TORCH_CHECK_VALUE(plan.device().is_cpu(),
                    "plan must be on the CPU (as rasterize_fwd returns it), got ", plan.device());
  const int64_t* v = plan.contiguous().data_ptr<int64_t>();
  const int64_t k = v[1];
  TORCH_CHECK_VALUE(k >= 0 && k < kNumRasterKernels, "plan holds no backward kernel, got ", k);
  TORCH_CHECK_VALUE(raster_kernel_runs(static_cast<RasterKernel>(k), true, mode == 0, target),
                    "plan: the backward kernel '", kRasterKernelNames[k],
                    "' does not run here (pass the plan rasterize_fwd returned for these inputs)");
  const RasterPlan p = load_plan(v);
  TORCH_CHECK_VALUE(p.grid == grid, "plan: its tile grid (tile_size ", p.grid.tile_size, ", ",
                    p.grid.tiles_x, " x ", p.grid.tiles_y, " tiles, ", p.grid.count,
                    " in all) is not these inputs' (tile_size ", grid.tile_size, ", ",
                    grid.tiles_x, " x ", grid.tiles_y, ", ", grid.count,
                    "): pass the plan rasterize_fwd returned for them");
  TORCH_CHECK_VALUE(p.forward_workspace >= 0 && p.backward_workspace >= 0,
                    "plan: workspace sizes must be >= 0, got ", p.forward_workspace, " and ",
                    p.backward_workspace);
  return p;
}

// Validates the tensors every rasterize op shares (both backends) and returns them contiguous;
// the caller keeps them alive while kernels read them.
struct RasterInputs {
  at::Tensor means2d, conics, opacities, colors, depths, backgrounds, tile_offsets, flatten_ids;
  TileGrid grid;  // the tile grid tile_offsets was checked against (make_tile_grid)
};

inline RasterInputs check_raster_inputs(const at::Tensor& means2d, const at::Tensor& conics,
                                        const at::Tensor& opacities, const at::Tensor& colors,
                                        const at::Tensor& depths,
                                        const c10::optional<at::Tensor>& backgrounds,
                                        const at::Tensor& tile_offsets,
                                        const at::Tensor& flatten_ids, int64_t width,
                                        int64_t height, int64_t tile_size, int64_t mode,
                                        at::ArrayRef<double> weight_params) {
  check_shape(means2d, "means2d", {-1, -1, 2});
  check_floating(means2d, "means2d");
  const int64_t C = means2d.size(0), N = means2d.size(1);
  const auto dt = means2d.scalar_type();
  const auto dev = means2d.device();
  check_shape(conics, "conics", {C, N, 3});
  check_shape(opacities, "opacities", {C, N});
  check_shape(colors, "colors", {C, N, -1});
  check_shape(depths, "depths", {C, N});
  TORCH_CHECK_VALUE(colors.size(2) >= 1 && colors.size(2) <= kMaxRasterChannels,
                    "colors must have 1 to ", kMaxRasterChannels, " channels, got ",
                    colors.size(2));
  for (auto [t, n] : {std::pair{&conics, "conics"}, {&opacities, "opacities"},
                      {&colors, "colors"}, {&depths, "depths"}}) {
    check_float(*t, n, dt);
    check_device(*t, n, dev);
  }
  at::Tensor bg;
  if (backgrounds.has_value() && backgrounds->defined()) {
    bg = *backgrounds;
    check_shape(bg, "backgrounds", {C, colors.size(2)});
    check_float(bg, "backgrounds", dt);
    check_device(bg, "backgrounds", dev);
    bg = bg.contiguous();
  }
  check_image_size(width, height);
  TORCH_CHECK_VALUE(tile_size > 0 && tile_size <= 256, "tile_size must be in [1, 256], got ",
                    tile_size);
  const TileGrid grid = make_tile_grid(C, width, height, tile_size);
  check_shape(tile_offsets, "tile_offsets", {C, grid.tiles_y, grid.tiles_x});
  check_int32(tile_offsets, "tile_offsets");
  check_shape(flatten_ids, "flatten_ids", {-1});
  check_int32(flatten_ids, "flatten_ids");
  check_device(tile_offsets, "tile_offsets", dev);
  check_device(flatten_ids, "flatten_ids", dev);
  TORCH_CHECK_VALUE(mode >= 0 && mode < kNumRasterModes,
                    "mode must be 0 (sorted) or 1 (weighted), got ", mode);
  TORCH_CHECK_VALUE(mode == 0 || weight_params.size() == 3,
                    "weight_params must be [sigma, beta, w_bg] in weighted mode");
  if (mode == 1)
    TORCH_CHECK_VALUE(weight_params[0] >= 0 && weight_params[1] > 0 && weight_params[2] > 0,
                      "weight_params need sigma >= 0, beta > 0, w_bg > 0");
  return {means2d.contiguous(), conics.contiguous(),       opacities.contiguous(),
          colors.contiguous(),  depths.contiguous(),       bg,
          tile_offsets.contiguous(), flatten_ids.contiguous(), grid};
}

// The forward outputs and upstream gradients rasterize_bwd receives: shapes and dtypes.
inline void check_raster_grads(const RasterInputs& in, int64_t width, int64_t height,
                               const at::Tensor& render, const at::Tensor& alphas,
                               const at::Tensor& last_ids, const at::Tensor& aux,
                               const at::Tensor& v_render, const at::Tensor& v_alphas) {
  const int64_t C = in.means2d.size(0), CH = in.colors.size(2);
  const auto dt = in.means2d.scalar_type();
  const auto dev = in.means2d.device();
  check_shape(render, "render", {C, height, width, CH});
  check_shape(alphas, "alphas", {C, height, width, 1});
  check_shape(last_ids, "last_ids", {C, height, width});
  check_shape(aux, "aux", {C, height, width});
  check_shape(v_render, "v_render", {C, height, width, CH});
  check_shape(v_alphas, "v_alphas", {C, height, width, 1});
  check_int32(last_ids, "last_ids");
  check_device(last_ids, "last_ids", dev);
  for (auto [t, n] : {std::pair{&render, "render"}, {&alphas, "alphas"}, {&aux, "aux"},
                      {&v_render, "v_render"}, {&v_alphas, "v_alphas"}}) {
    check_float(*t, n, dt);
    check_device(*t, n, dev);
  }
}

// Fills RasterArgs from validated inputs (pointers into the contiguous tensors the caller keeps
// alive; the tile geometry from in.grid).
template <typename T>
RasterArgs<T> make_raster_args(const RasterInputs& in, int64_t width, int64_t height,
                               int64_t mode, at::ArrayRef<double> weight_params) {
  RasterArgs<T> a;
  a.means2d = in.means2d.data_ptr<T>();
  a.conics = in.conics.data_ptr<T>();
  a.opacities = in.opacities.data_ptr<T>();
  a.colors = in.colors.data_ptr<T>();
  a.depths = in.depths.data_ptr<T>();
  a.backgrounds = in.backgrounds.defined() ? in.backgrounds.data_ptr<T>() : nullptr;
  a.tile_offsets = in.tile_offsets.data_ptr<int32_t>();
  a.flatten_ids = in.flatten_ids.data_ptr<int32_t>();
  a.C = in.means2d.size(0), a.N = in.means2d.size(1), a.CH = in.colors.size(2);
  a.M = in.flatten_ids.numel();
  a.width = static_cast<int>(width), a.height = static_cast<int>(height);
  a.tile_size = in.grid.tile_size;
  a.TW = in.grid.tiles_x, a.TH = in.grid.tiles_y;
  a.sorted = mode == 0;
  a.sigma_w = static_cast<T>(mode == 1 ? weight_params[0] : 0.0);
  a.beta = static_cast<T>(mode == 1 ? weight_params[1] : 1.0);
  a.w_bg = static_cast<T>(mode == 1 ? weight_params[2] : 0.0);
  return a;
}

// rasterize_fwd's outputs, allocated: render [C,H,W,CH], alphas [C,H,W,1], last_ids [C,H,W]
// int32, aux [C,H,W], stats [C,3] int64 (zeroed: the kernels add into it); the plan tensor
// comes from plan_tensor.
struct RasterOutputs {
  at::Tensor render, alphas, last_ids, aux, stats;
};
using RasterFwdResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                                   at::Tensor>;
// (Host images on huge pages: gsrender/host_alloc.h.)
inline RasterOutputs empty_raster_outputs(int64_t C, int64_t height, int64_t width, int64_t CH,
                                          const at::TensorOptions& opts) {
  return {empty_output({C, height, width, CH}, opts), empty_output({C, height, width, 1}, opts),
          empty_output({C, height, width}, opts.dtype(at::kInt)),
          empty_output({C, height, width}, opts), at::zeros({C, 3}, opts.dtype(at::kLong))};
}

// rasterize_bwd's contiguous saved outputs and incoming gradients, and its zeroed gradient
// buffers: v_means2d [C,N,2], v_conics [C,N,3], v_opacities [C,N], v_colors [C,N,CH],
// v_depths [C,N] (weighted mode only), v_backgrounds [C,CH] (stays 0 without backgrounds).
struct RasterBwdTensors {
  at::Tensor render, alphas, last_ids, aux, v_render, v_alphas;
  at::Tensor v_means2d, v_conics, v_opacities, v_colors, v_depths, v_backgrounds;

  std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> grads()
      const {
    return {v_means2d, v_conics, v_opacities, v_colors, v_depths, v_backgrounds};
  }
  template <typename T>
  RasterBwdIO<T> io() const {
    return {render.data_ptr<T>(),      alphas.data_ptr<T>(),   last_ids.data_ptr<int32_t>(),
            aux.data_ptr<T>(),         v_render.data_ptr<T>(), v_alphas.data_ptr<T>(),
            v_means2d.data_ptr<T>(),   v_conics.data_ptr<T>(), v_opacities.data_ptr<T>(),
            v_colors.data_ptr<T>(),    v_depths.data_ptr<T>(), v_backgrounds.data_ptr<T>()};
  }
};
inline RasterBwdTensors prepare_raster_bwd(const RasterInputs& in, const at::Tensor& render,
                                           const at::Tensor& alphas, const at::Tensor& last_ids,
                                           const at::Tensor& aux, const at::Tensor& v_render,
                                           const at::Tensor& v_alphas) {
  const int64_t C = in.means2d.size(0), N = in.means2d.size(1), CH = in.colors.size(2);
  const auto opts = in.means2d.options();
  return {render.contiguous(),      alphas.contiguous(),   last_ids.contiguous(),
          aux.contiguous(),         v_render.contiguous(), v_alphas.contiguous(),
          zeros_output({C, N, 2}, opts), zeros_output({C, N, 3}, opts), zeros_output({C, N}, opts),
          zeros_output({C, N, CH}, opts), zeros_output({C, N}, opts), at::zeros({C, CH}, opts)};
}

}  // namespace gsrender
