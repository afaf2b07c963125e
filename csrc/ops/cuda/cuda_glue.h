// What the torch glue of the CUDA ops (csrc/cuda/*.cu) shares: the current stream, a workspace
// from torch's caching allocator for the launchers of gsrender/launch/, the tile-size check, the
// rasterize plan's target and the device-side binning validation. The kernels themselves are in csrc/cuda/.
#pragma once
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include "gsrender/launch/common.h"
#include "gsrender/raster_interface.h"

namespace gsrender {
namespace gpu {

inline cudaStream_t current_stream() { return c10::cuda::getCurrentCUDAStream(); }

// A launcher's workspace as a byte tensor (kept alive while the stream uses it: the caching
// allocator's stream semantics make freeing right after the launch safe).
class ScratchBuffer {
 public:
  ScratchBuffer(size_t bytes, const at::Device& device)
      : t_(at::empty({static_cast<int64_t>(bytes)},
                     at::TensorOptions().dtype(at::kByte).device(device))) {}
  launch::Workspace get() const { return {t_.data_ptr(), static_cast<size_t>(t_.numel())}; }

 private:
  at::Tensor t_;
};

// tile_size 1..16 (one thread per pixel of a tile, launch::kMaxTileSize).
void check_cuda_tile_size(int64_t tile_size);

// Untrusted binning arrays (the raw ops can be called directly) are checked on the device, with
// the same rules and messages as the CPU's check_binning and last_ids check; the result comes
// back through one host sync per op call (cheap next to the rasterization itself) and turns a
// would-be out-of-bounds read into a ValueError.
void validate_binning_cuda(const RasterInputs& in, const at::Tensor* last_ids, int64_t width,
                           int64_t height, int64_t tile_size);

// The rasterize plan's target on the inputs' device (gsrender/raster_plan.h): dtype, tile size
// and the device's compute capability (queried once per device, then cached).
RasterTarget cuda_raster_target(const at::Tensor& means2d, int64_t tile_size);

}  // namespace gpu
}  // namespace gsrender
