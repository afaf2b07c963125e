// The CPU ops' check of the binning arrays they are handed (torch side: the kernels' headers,
// raster_tile.h and row_tile.h, include no torch header).
#pragma once
#include <ATen/ATen.h>

#include "gsrender/raster_interface.h"

namespace gsrender {
namespace cpu {

// Host-side sanity of the binning arrays (untrusted when the op is called directly): offsets
// non-decreasing within [0, M] and every id inside its camera.
inline void check_binning(const RasterInputs& in) {
  const int64_t M = in.flatten_ids.numel(), C = in.means2d.size(0), N = in.means2d.size(1);
  const int32_t* off = in.tile_offsets.data_ptr<int32_t>();
  const int64_t T = in.tile_offsets.numel();
  const int64_t tiles_per_cam = C > 0 ? T / C : 0;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t end = t + 1 < T ? off[t + 1] : M;
    TORCH_CHECK_VALUE(off[t] >= 0 && off[t] <= end && end <= M,
                      "tile_offsets must be non-decreasing within [0, len(flatten_ids)]");
    const int32_t* ids = in.flatten_ids.data_ptr<int32_t>();
    const int64_t cam = t / tiles_per_cam;
    for (int64_t i = off[t]; i < end; ++i)
      TORCH_CHECK_VALUE(ids[i] >= cam * N && ids[i] < (cam + 1) * N,
                        "flatten_ids holds an id outside its camera's Gaussians");
  }
}

}  // namespace cpu
}  // namespace gsrender
