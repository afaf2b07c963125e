// The contributors op on the CPU: checks its arguments, allocates the outputs and runs
// contributors_kernel.cpp (the walk itself: what it lists is written there).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "binning_check.h"
#include "cpu/contributors_kernel.h"
#include "gsrender/contributors.h"

namespace gsrender {
namespace cpu {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
contributors_cpu(const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& opacities,
                 const at::Tensor& depths, const at::Tensor& tile_offsets,
                 const at::Tensor& flatten_ids, int64_t width, int64_t height, int64_t tile_size,
                 const c10::optional<at::Tensor>& pixels, int64_t K_max, double tau_rel,
                 double tau_abs) {
  const auto checked = check_contributors_inputs(means2d, conics, opacities, depths, tile_offsets,
                                                 flatten_ids, width, height, tile_size, pixels,
                                                 K_max, tau_rel, tau_abs);
  const RasterInputs& in = checked.first;
  const at::Tensor& pix = checked.second;
  check_binning(in);
  const int64_t C = means2d.size(0);
  const int64_t P = pix.defined() ? pix.size(1) : height * width;
  const auto opts = means2d.options();
  const auto iopts = opts.dtype(at::kInt);
  at::Tensor ids = at::empty({C, P, K_max}, iopts), weights = at::empty({C, P, K_max}, opts),
             zs = at::empty({C, P, K_max}, opts), clusters = at::empty({C, P, K_max}, iopts),
             counts = at::empty({C, P}, iopts), n_render = at::empty({C, P}, iopts);
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "contributors_cpu", [&] {
    using T = scalar_t;
    const RasterArgs<T> a = make_raster_args<T>(in, width, height, 0, {});
    const ContribOutputs<T> o{ids.data_ptr<int32_t>(),      weights.data_ptr<T>(),
                              zs.data_ptr<T>(),             clusters.data_ptr<int32_t>(),
                              counts.data_ptr<int32_t>(),   n_render.data_ptr<int32_t>()};
    const int32_t* p = pix.defined() ? pix.data_ptr<int32_t>() : nullptr;
    contributors_pixels<T>(a, p, P, K_max, tau_rel, tau_abs, o);
  });
  return {ids, weights, zs, clusters, counts, n_render};
}

}  // namespace
}  // namespace cpu

TORCH_LIBRARY_IMPL(gsrender, CPU, m) { m.impl("contributors", &cpu::contributors_cpu); }

}  // namespace gsrender
