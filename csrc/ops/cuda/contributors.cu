// Torch glue of contributors on CUDA: checks, allocation, the launcher of
// gsrender/launch/contributors.h (kernel in csrc/cuda/contributors_kernel.cu).
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>

#include "cuda_glue.h"
#include "gsrender/contributors.h"
#include "gsrender/launch/contributors.h"

namespace gsrender {
namespace gpu {
namespace {

using at::Tensor;

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> contributors_cuda(
    const Tensor& means2d, const Tensor& conics, const Tensor& opacities, const Tensor& depths,
    const Tensor& tile_offsets, const Tensor& flatten_ids, int64_t width, int64_t height,
    int64_t tile_size, const c10::optional<Tensor>& pixels, int64_t K_max, double tau_rel,
    double tau_abs) {
  const auto checked =
      check_contributors_inputs(means2d, conics, opacities, depths, tile_offsets, flatten_ids,
                                width, height, tile_size, pixels, K_max, tau_rel, tau_abs);
  const RasterInputs& in = checked.first;
  const Tensor& pix = checked.second;
  const c10::cuda::CUDAGuard guard(means2d.device());
  validate_binning_cuda(in, nullptr, width, height, tile_size);
  const int64_t C = means2d.size(0), P = pix.defined() ? pix.size(1) : height * width;
  const auto opts = means2d.options();
  const auto iopts = opts.dtype(at::kInt);
  Tensor ids = at::empty({C, P, K_max}, iopts), weights = at::empty({C, P, K_max}, opts),
         zs = at::empty({C, P, K_max}, opts), clusters = at::empty({C, P, K_max}, iopts),
         counts = at::empty({C, P}, iopts), n_render = at::empty({C, P}, iopts);
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "contributors_cuda", [&] {
    using T = scalar_t;
    const launch::ContributorsArgs<T> a{
        make_raster_args<T>(in, width, height, 0, {}),
        pix.defined() ? pix.data_ptr<int32_t>() : nullptr,
        P,
        K_max,
        static_cast<T>(tau_rel),
        static_cast<T>(tau_abs),
        {ids.data_ptr<int32_t>(), weights.data_ptr<T>(), zs.data_ptr<T>(),
         clusters.data_ptr<int32_t>(), counts.data_ptr<int32_t>(), n_render.data_ptr<int32_t>()}};
    C10_CUDA_CHECK(launch::launch_contributors(a, current_stream()));
  });
  return {ids, weights, zs, clusters, counts, n_render};
}

}  // namespace
}  // namespace gpu

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) { m.impl("contributors", &gpu::contributors_cuda); }

}  // namespace gsrender
