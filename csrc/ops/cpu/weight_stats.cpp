// weight_stats' CPU op: checks its arguments, allocates the outputs and runs
// weight_stats_kernel.cpp (the statistics themselves: what they are is written there).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binning_check.h"
#include "gsrender/weight_stats.h"
#include "cpu/weight_stats_kernel.h"

namespace gsrender {
namespace cpu {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> weight_stats_cpu(
    const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& opacities,
    const at::Tensor& depths, const at::Tensor& tile_offsets, const at::Tensor& flatten_ids,
    int64_t width, int64_t height, int64_t tile_size, double tau_s, int64_t top_k) {
  const RasterInputs in = check_weight_stats_inputs(means2d, conics, opacities, depths,
                                                    tile_offsets, flatten_ids, width, height,
                                                    tile_size, tau_s, top_k);
  check_binning(in);
  const int64_t C = means2d.size(0), N = means2d.size(1), K = top_k;
  const auto opts = means2d.options();
  at::Tensor wsum = at::zeros({N}, opts), wmax = at::zeros({N}, opts);
  at::Tensor nviews = at::zeros({N}, opts.dtype(at::kInt));
  at::Tensor topk_ids = at::full({C, height, width, K}, -1, opts.dtype(at::kInt));
  at::Tensor topk_w = at::zeros({C, height, width, K}, opts);
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "weight_stats_cpu", [&] {
    using T = scalar_t;
    const RasterArgs<T> a = make_raster_args<T>(in, width, height, 0, {});
    const WeightStatsOut<T> o{wsum.data_ptr<T>(), wmax.data_ptr<T>(), nviews.data_ptr<int32_t>(),
                              topk_ids.data_ptr<int32_t>(), topk_w.data_ptr<T>()};
    weight_stats_views<T>(a, tau_s, K, o);
  });
  return {wsum, wmax, nviews, topk_ids, topk_w};
}

}  // namespace
}  // namespace cpu

TORCH_LIBRARY_IMPL(gsrender, CPU, m) { m.impl("weight_stats", &cpu::weight_stats_cpu); }

}  // namespace gsrender
