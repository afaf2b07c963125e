// Depth-aware contributors (VODA, docs/design.md §7 step 1): per requested pixel, the front-to-back list
// of Gaussians that reach α ≥ 1/255 there, with the renderer's weight w = α·T and view depth z,
// split into depth-coherent clusters. The α, the 1/255 cut, the 0.99 clamp and the order are the
// sorted rasterizer's (alpha.h, the tile lists of bin_tiles), so the first n_render weights of a
// pixel are exactly the weights rasterize_fwd composites.
#include "pixel_contraction.h"  // first: it sets the compile options of all that follows
#include "contributors_kernel.h"

#include "isa.h"

namespace gsrender {
namespace cpu {

template <typename T>
void contributors_pixels(const RasterArgs<T>& a, const int32_t* pixels, int64_t P, int64_t K_max,
                         double tau_rel, double tau_abs, const ContribOutputs<T>& o) {
  const int64_t C = a.C, width = a.width;
  const int32_t* p = pixels;
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
}

template void contributors_pixels<float>(const RasterArgs<float>&, const int32_t*, int64_t,
                                         int64_t, double, double, const ContribOutputs<float>&);
template void contributors_pixels<double>(const RasterArgs<double>&, const int32_t*, int64_t,
                                          int64_t, double, double, const ContribOutputs<double>&);

}  // namespace cpu
}  // namespace gsrender
