// Torch glue of bin_tiles on CUDA and of the device-side validation of binning arrays: checks,
// allocation, the one host sync (M), the launchers of gsrender/launch/binning.h (kernels in
// csrc/cuda/binning_kernel.cu).
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>

#include "cuda_glue.h"
#include "gsrender/launch/binning.h"
#include "gsrender/launch/rasterize.h"
#include "gsrender/validation.h"

namespace gsrender {
namespace gpu {

using at::Tensor;

namespace {

std::tuple<Tensor, Tensor> bin_tiles_cuda(const Tensor& means2d, const Tensor& radii,
                                          const Tensor& depths, int64_t width, int64_t height,
                                          int64_t tile_size, bool sort,
                                          const c10::optional<Tensor>& conics,
                                          const c10::optional<Tensor>& opacities) {
  check_bin_tiles_inputs(means2d, radii, depths, width, height, tile_size, conics, opacities);
  const c10::cuda::CUDAGuard guard(means2d.device());
  const int64_t C = means2d.size(0), N = means2d.size(1), CN = C * N;
  const int ts = static_cast<int>(tile_size);
  const TileGrid grid = make_tile_grid(C, width, height, ts);
  const int TW = grid.tiles_x, TH = grid.tiles_y;
  const int64_t n_tiles = grid.count;
  TORCH_CHECK_VALUE(n_tiles < INT32_MAX, "bin_tiles: ", n_tiles, " tiles exceed int32 range");
  const auto iopts = radii.options();
  Tensor tile_offsets = at::empty({C, TH, TW}, iopts);  // [C, TH, TW]
  if (CN == 0) return {tile_offsets.zero_(), at::empty({0}, iopts)};
  const Tensor m2d = means2d.contiguous(), rad = radii.contiguous(), dep = depths.contiguous();
  const Tensor con = conics ? conics->contiguous() : Tensor();
  const Tensor opa = opacities ? opacities->contiguous() : Tensor();
  const cudaStream_t stream = current_stream();
  Tensor flatten_ids;
  AT_DISPATCH_FLOATING_TYPES(m2d.scalar_type(), "bin_tiles_cuda", [&] {
    using T = scalar_t;
    const launch::BinArgs<T> a{m2d.data_ptr<T>(), rad.data_ptr<int32_t>(), dep.data_ptr<T>(),
                               C, N, static_cast<int>(width), static_cast<int>(height), ts, sort,
                               con.defined() ? con.data_ptr<T>() : nullptr,
                               opa.defined() ? opa.data_ptr<T>() : nullptr};
    const Tensor ends = at::empty({CN}, iopts.dtype(at::kLong));  // [C*N]
    {
      const ScratchBuffer ws(launch::bin_count_workspace_bytes(a), means2d.device());
      C10_CUDA_CHECK(launch::launch_bin_count(a, ends.data_ptr<int64_t>(), ws.get(), stream));
    }
    // The one host sync of binning: the number of intersections M sizes every later buffer.
    const int64_t M = ends[CN - 1].item<int64_t>();
    TORCH_CHECK_VALUE(M < INT32_MAX, "bin_tiles: ", M, " tile intersections exceed int32 range");
    flatten_ids = at::empty({M}, iopts);  // [M] flat ids c*N + n
    const ScratchBuffer ws(launch::bin_sort_workspace_bytes(a, M), means2d.device());
    C10_CUDA_CHECK(launch::launch_bin_sort(a, ends.data_ptr<int64_t>(), M,
                                           tile_offsets.data_ptr<int32_t>(),
                                           flatten_ids.data_ptr<int32_t>(), ws.get(), stream));
  });
  return {tile_offsets, flatten_ids};
}

}  // namespace

void check_cuda_tile_size(int64_t tile_size) {
  TORCH_CHECK_VALUE(tile_size >= 1 && tile_size <= launch::kMaxTileSize,
                    "tile_size must be in [1, 16] on the CUDA backend (one thread per pixel of "
                    "a tile), got ", tile_size);
}

void validate_binning_cuda(const RasterInputs& in, const Tensor* last_ids, int64_t width,
                           int64_t height, int64_t tile_size) {
  // A value check: it reads the flags back (a host sync), so only under validation (validation.h)
  if (!validation_enabled() || in.tile_offsets.numel() == 0) return;
  Tensor last_c;
  if (last_ids != nullptr) last_c = last_ids->contiguous();
  const launch::ValidateBinningArgs a{
      in.tile_offsets.data_ptr<int32_t>(), in.flatten_ids.data_ptr<int32_t>(),
      last_ids ? last_c.data_ptr<int32_t>() : nullptr, in.means2d.size(0), in.means2d.size(1),
      in.flatten_ids.numel(), static_cast<int>(width), static_cast<int>(height),
      static_cast<int>(tile_size), static_cast<int>(in.tile_offsets.size(2)),
      static_cast<int>(in.tile_offsets.size(1))};
  Tensor flags = at::empty({1}, in.tile_offsets.options());
  C10_CUDA_CHECK(launch::launch_validate_binning(a, flags.data_ptr<int32_t>(), current_stream()));
  const int bad = flags.item<int32_t>();  // the host sync validation costs
  TORCH_CHECK_VALUE(!(bad & launch::kBadOffsets),
                    "tile_offsets must be non-decreasing within [0, len(flatten_ids)]");
  TORCH_CHECK_VALUE(!(bad & launch::kBadIds),
                    "flatten_ids holds an id outside its camera's Gaussians");
  TORCH_CHECK_VALUE(!(bad & launch::kBadLastIds),
                    "last_ids must lie inside each pixel's tile run (as rasterize_fwd returns it)");
}

}  // namespace gpu
}  // namespace gsrender

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) { m.impl("bin_tiles", &gsrender::gpu::bin_tiles_cuda); }
