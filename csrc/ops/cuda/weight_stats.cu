// Torch glue of weight_stats on CUDA: checks, allocation, the launcher of
// gsrender/launch/weight_stats.h (kernel in csrc/cuda/weight_stats_kernel.cu).
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>

#include "cuda_glue.h"
#include "gsrender/launch/weight_stats.h"
#include "gsrender/weight_stats.h"

namespace gsrender {
namespace gpu {
namespace {

using at::Tensor;

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> weight_stats_cuda(
    const Tensor& means2d, const Tensor& conics, const Tensor& opacities, const Tensor& depths,
    const Tensor& tile_offsets, const Tensor& flatten_ids, int64_t width, int64_t height,
    int64_t tile_size, double tau_s, int64_t top_k) {
  const RasterInputs in = check_weight_stats_inputs(means2d, conics, opacities, depths,
                                                    tile_offsets, flatten_ids, width, height,
                                                    tile_size, tau_s, top_k);
  check_cuda_tile_size(tile_size);
  const c10::cuda::CUDAGuard guard(means2d.device());
  validate_binning_cuda(in, nullptr, width, height, tile_size);
  const int64_t C = means2d.size(0), N = means2d.size(1);
  const auto opts = means2d.options();
  Tensor wsum = at::zeros({N}, opts), wmax = at::zeros({N}, opts);
  Tensor n_views = at::empty({N}, opts.dtype(at::kInt));
  Tensor topk_ids = at::full({C, height, width, top_k}, -1, opts.dtype(at::kInt));
  Tensor topk_w = at::zeros({C, height, width, top_k}, opts);
  const int64_t n_tiles = in.tile_offsets.numel();
  TORCH_CHECK_VALUE(n_tiles < INT32_MAX, "weight_stats: ", n_tiles, " tiles exceed the grid");
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "weight_stats_cuda", [&] {
    using T = scalar_t;
    const launch::WeightStatsArgs<T> a{
        make_raster_args<T>(in, width, height, 0, {}), top_k, static_cast<T>(tau_s),
        wsum.data_ptr<T>(), wmax.data_ptr<T>(), n_views.data_ptr<int32_t>(),
        topk_ids.data_ptr<int32_t>(), topk_w.data_ptr<T>()};
    const ScratchBuffer ws(launch::weight_stats_workspace_bytes(a), means2d.device());
    C10_CUDA_CHECK(launch::launch_weight_stats(a, ws.get(), current_stream()));
  });
  return {wsum, wmax, n_views, topk_ids, topk_w};
}

}  // namespace
}  // namespace gpu

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) { m.impl("weight_stats", &gpu::weight_stats_cuda); }

}  // namespace gsrender
