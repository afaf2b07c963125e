// The VODA contributors op (docs/design.md §7 step 1), shared by the CPU and CUDA backends: the argument
// checks; one pixel's walk (torch-free, for the kernels) is in gsrender/contributors_walk.h.
#pragma once
#include <ATen/ATen.h>

#include <cmath>
#include <utility>

#include "gsrender/alpha.h"
#include "gsrender/checks.h"
#include "gsrender/common.h"
#include "gsrender/contributors_walk.h"
#include "gsrender/raster_interface.h"
#include "gsrender/validation.h"

namespace gsrender {

// Validates the op's arguments (the raster checks with depths standing in for the one channel
// the op reads) and returns the inputs plus the contiguous pixel list (undefined = every pixel).
// The pixel values are checked on the host: a CUDA pixel list is copied back once for it.
inline std::pair<RasterInputs, at::Tensor> check_contributors_inputs(
    const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& opacities,
    const at::Tensor& depths, const at::Tensor& tile_offsets, const at::Tensor& flatten_ids,
    int64_t width, int64_t height, int64_t tile_size, const c10::optional<at::Tensor>& pixels,
    int64_t K_max, double tau_rel, double tau_abs) {
  // depths first: it also stands in for the raster checks' channel tensor below (the one
  // channel this op reads), whose errors would otherwise name `colors`
  check_shape(means2d, "means2d", {-1, -1, 2});
  check_floating(means2d, "means2d");
  check_shape(depths, "depths", {means2d.size(0), means2d.size(1)});
  check_float(depths, "depths", means2d.scalar_type());
  const RasterInputs in =
      check_raster_inputs(means2d, conics, opacities, depths.unsqueeze(-1), depths, c10::nullopt,
                          tile_offsets, flatten_ids, width, height, tile_size, 0, {});
  TORCH_CHECK_VALUE(K_max >= 1 && K_max <= kMaxContributors, "K_max must be in [1, ",
                    kMaxContributors, "], got ", K_max);
  TORCH_CHECK_VALUE(std::isfinite(tau_rel) && tau_rel >= 0, "tau_rel must be finite and >= 0, got ",
                    tau_rel);
  TORCH_CHECK_VALUE(std::isfinite(tau_abs) && tau_abs >= 0, "tau_abs must be finite and >= 0, got ",
                    tau_abs);
  const int64_t C = means2d.size(0);
  at::Tensor pix;
  if (pixels.has_value() && pixels->defined()) {
    check_shape(*pixels, "pixels", {C, -1, 2});
    check_int32(*pixels, "pixels");
    check_device(*pixels, "pixels", means2d.device());
    pix = pixels->contiguous();
    // a value check: on CUDA a device→host copy, so only under validation (validation.h); the
    // CUDA kernel gives a pixel outside the image an empty list instead of reading past it
    if (pix.is_cpu() || validation_enabled()) {
      const at::Tensor host = pix.cpu();
      const int32_t* p = host.data_ptr<int32_t>();
      for (int64_t i = 0; i < pix.numel(); i += 2) {
        const bool pad = p[i] == -1 && p[i + 1] == -1;
        TORCH_CHECK_VALUE(
            pad || (p[i] >= 0 && p[i] < width && p[i + 1] >= 0 && p[i + 1] < height),
            "pixels must hold (x, y) inside the ", width, "x", height,
            " image or (-1, -1) padding, got (", p[i], ", ", p[i + 1], ")");
      }
    }
  }
  return {in, pix};
}

}  // namespace gsrender
