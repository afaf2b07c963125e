// CUDA contributors (VODA): one thread per requested pixel, running the walk the CPU runs
// (gsrender/contributors.h) on the same tile lists, reading the list straight from global memory
// (a pixel's walk is short and irregular: it goes past the renderer's stop until the open depth
// cluster closes, so a tile-wide shared staging would serialise the block on its longest walk).
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>

#include "gsrender/contributors.h"
#include "raster_common.cuh"

namespace gsrender {
namespace gpu {
namespace {

using at::Tensor;

constexpr int kThreads = 128;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    contributors_kernel(const RasterArgs<T> a, const int32_t* __restrict__ pix, int64_t P,
                        int64_t K, T tau_rel, T tau_abs, const ContribOutputs<T> o) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.C * P) return;
  const int64_t cam = i / P, q = i % P;
  const int x = pix ? pix[2 * i] : static_cast<int>(q % a.width);
  const int y = pix ? pix[2 * i + 1] : static_cast<int>(q / a.width);
  if (x < 0)  // padding: an empty list
    close_list(o, i, K, 0, 0);
  else
    pixel_contributors<T>(a, cam, x, y, K, tau_rel, tau_abs, i, o);
}

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
  const int64_t n = C * P;
  if (n > 0) {
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "contributors_cuda", [&] {
      using T = scalar_t;
      const RasterArgs<T> a = make_raster_args<T>(in, width, height, tile_size, 0, {});
      const ContribOutputs<T> o{ids.data_ptr<int32_t>(),    weights.data_ptr<T>(),
                                zs.data_ptr<T>(),           clusters.data_ptr<int32_t>(),
                                counts.data_ptr<int32_t>(), n_render.data_ptr<int32_t>()};
      contributors_kernel<T><<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0,
                               stream>>>(a, pix.defined() ? pix.data_ptr<int32_t>() : nullptr, P,
                                         K_max, static_cast<T>(tau_rel), static_cast<T>(tau_abs),
                                         o);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  }
  return {ids, weights, zs, clusters, counts, n_render};
}

}  // namespace
}  // namespace gpu

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) { m.impl("contributors", &gpu::contributors_cuda); }

}  // namespace gsrender
