// Depth-aware contributors (VODA, docs/design.md §7 step 1): per requested pixel, the front-to-back list
// of Gaussians that reach α ≥ 1/255 there, with the renderer's weight w = α·T and view depth z,
// split into depth-coherent clusters. The α, the 1/255 cut, the 0.99 clamp and the order are the
// sorted rasterizer's (alpha.h, the tile lists of bin_tiles), so the first n_render weights of a
// pixel are exactly the weights rasterize_fwd composites.
#include "pixel_contraction.h"  // first: it sets the compile options of all that follows
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>

#include "gsrender/contributors.h"
#include "isa.h"
#include "binning_check.h"
#include "raster_tile.h"

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
    cpu::parallel_for(0, C * P, 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t cam = i / P, q = i % P;
        const int x = p ? p[2 * i] : static_cast<int>(q % width);
        const int y = p ? p[2 * i + 1] : static_cast<int>(q / width);
        if (x < 0)  // padding: an empty list
          close_list(o, i, K_max, 0, 0);
        else
          pixel_contributors<T>(a, cam, x, y, K_max, T(tau_rel), T(tau_abs), i, o);
      }
    });
  });
  return {ids, weights, zs, clusters, counts, n_render};
}

}  // namespace
}  // namespace cpu

TORCH_LIBRARY_IMPL(gsrender, CPU, m) { m.impl("contributors", &cpu::contributors_cpu); }

}  // namespace gsrender
