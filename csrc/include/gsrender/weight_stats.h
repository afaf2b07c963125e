// weight_stats (SplitGS-Loc, DESIGN §7), shared by the CPU and CUDA backends: the argument checks
// and the per-pixel top-K insertion, so both backends accept the same inputs and rank ties alike.
#pragma once
#include <ATen/ATen.h>

#include <cmath>

#include "gsrender/common.h"
#include "gsrender/raster_checks.h"

namespace gsrender {

constexpr int64_t kMaxTopK = 64;

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

// Keeps the K largest (weight, id) pairs of one pixel, sorted by weight (descending; ties keep
// the earlier, i.e. nearer, Gaussian first). ws / ids start as K zeros / -1.
template <typename T>
GSR_HOST_DEVICE void topk_insert(T w, int32_t id, int64_t K, T* ws, int32_t* ids) {
  if (K == 0 || !(w > ws[K - 1])) return;
  int64_t i = K - 1;
  while (i > 0 && w > ws[i - 1]) {
    ws[i] = ws[i - 1], ids[i] = ids[i - 1];
    --i;
  }
  ws[i] = w, ids[i] = id;
}

}  // namespace gsrender
