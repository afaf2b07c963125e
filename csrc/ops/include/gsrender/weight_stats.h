// weight_stats (SplitGS-Loc, docs/design.md §7), shared by the CPU and CUDA backends: the argument checks
// (the per-pixel top-K insertion both backends run is in the torch-free gsrender/topk.h).
#pragma once
#include <ATen/ATen.h>

#include <cmath>

#include "gsrender/common.h"
#include "gsrender/raster_interface.h"
#include "gsrender/topk.h"

namespace gsrender {

// Validates the op's arguments; the rasterize checks run with opacities standing in for the
// (unused) colour channels.
inline RasterInputs check_weight_stats_inputs(const at::Tensor& means2d, const at::Tensor& conics,
                                              const at::Tensor& opacities, const at::Tensor& depths,
                                              const at::Tensor& tile_offsets,
                                              const at::Tensor& flatten_ids, int64_t width,
                                              int64_t height, int64_t tile_size, double tau_s,
                                              int64_t top_k) {
  TORCH_CHECK_VALUE(top_k >= 0 && top_k <= kMaxTopK, "top_k must be in [0, ", kMaxTopK, "], got ",
                    top_k);
  TORCH_CHECK_VALUE(std::isfinite(tau_s) && tau_s >= 0 && tau_s < 1,
                    "tau_s must be in [0, 1), got ", tau_s);
  check_shape(opacities, "opacities", {-1, -1});
  return check_raster_inputs(means2d, conics, opacities, opacities.unsqueeze(-1), depths,
                             c10::nullopt, tile_offsets, flatten_ids, width, height, tile_size,
                             /*mode=*/0, {});
}

}  // namespace gsrender
