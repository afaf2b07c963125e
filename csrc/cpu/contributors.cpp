// Depth-aware contributors (VODA, DESIGN §7 step 1): per requested pixel, the front-to-back list
// of Gaussians that reach α ≥ 1/255 there, with the renderer's weight w = α·T and view depth z,
// split into depth-coherent clusters. The α, the 1/255 cut, the 0.99 clamp and the order are the
// sorted rasterizer's (alpha.h, the tile lists of bin_tiles), so the first n_render weights of a
// pixel are exactly the weights rasterize_fwd composites.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>

#include "raster_tile.h"

namespace gsrender {
namespace cpu {
namespace {

constexpr int64_t kMaxContributors = 4096;

template <typename T>
struct ContribOutputs {
  int32_t* ids;       // [C, P, K]
  T* weights;         // [C, P, K]
  T* zs;              // [C, P, K]
  int32_t* clusters;  // [C, P, K]
  int32_t* counts;    // [C, P]
  int32_t* n_render;  // [C, P]
};

// Pads entries [k, K) of list `out` and records its count and renderer prefix.
template <typename T>
void close_list(const ContribOutputs<T>& o, int64_t out, int64_t K, int32_t k, int32_t n_render) {
  for (int64_t e = out * K + k; e < (out + 1) * K; ++e)
    o.ids[e] = -1, o.weights[e] = T(0), o.zs[e] = T(0), o.clusters[e] = -1;
  o.counts[out] = k;
  o.n_render[out] = n_render;
}

// One pixel's walk down its tile's depth-ordered list. Past the renderer's stop (T·(1−α) <
// 1e-4) the walk goes on (T keeps shrinking) while entries stay in the cluster that was open at
// the stop: the Gaussians behind the saturating front of a surface belong to it too.
template <typename T>
void pixel_contributors(const RasterArgs<T>& a, int64_t cam, int x, int y, int64_t K, T tau_rel,
                        T tau_abs, int64_t out, const ContribOutputs<T>& o) {
  const int64_t t = (cam * a.TH + y / a.tile_size) * a.TW + x / a.tile_size;
  const T px = x + T(0.5), py = y + T(0.5);
  T tr = 1, zprev = 0;
  int32_t k = 0, cluster = -1, n_render = 0;
  bool stopped = false;
  for (int32_t i = a.tile_start(t); i < a.tile_end(t); ++i) {
    const int32_t id = a.flatten_ids[i];
    const T alpha = pair_alpha<T>(a.opacities[id],
                                  gaussian_sigma<T>(a.conics[3 * id], a.conics[3 * id + 1],
                                                    a.conics[3 * id + 2], a.means2d[2 * id] - px,
                                                    a.means2d[2 * id + 1] - py));
    if (alpha == T(0)) continue;
    const T z = a.depths[id];
    const bool opens = k == 0 || z - zprev > tau_rel * zprev + tau_abs;
    if (opens && stopped) break;  // the cluster open at the stop has closed
    if (k == K) break;
    cluster += opens;
    const T next = tr * (T(1) - alpha);
    // the renderer excludes the Gaussian that would push T below 1e-4, and everything after it
    stopped = stopped || next < T(kTransmittanceMin);
    const int64_t e = out * K + k;
    o.ids[e] = static_cast<int32_t>(id % a.N);
    o.weights[e] = alpha * tr;
    o.zs[e] = z;
    o.clusters[e] = cluster;
    tr = next, zprev = z, ++k;
    n_render += !stopped;
  }
  close_list(o, out, K, k, n_render);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
contributors_cpu(const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& opacities,
                 const at::Tensor& depths, const at::Tensor& tile_offsets,
                 const at::Tensor& flatten_ids, int64_t width, int64_t height, int64_t tile_size,
                 const c10::optional<at::Tensor>& pixels, int64_t K_max, double tau_rel,
                 double tau_abs) {
  // depths first: it also stands in for the raster checks' channel tensor below (the one
  // channel this op reads), whose errors would otherwise name `colors`
  check_shape(means2d, "means2d", {-1, -1, 2});
  check_floating(means2d, "means2d");
  check_shape(depths, "depths", {means2d.size(0), means2d.size(1)});
  check_float(depths, "depths", means2d.scalar_type());
  const RasterInputs in =
      check_raster_inputs(means2d, conics, opacities, depths.unsqueeze(-1), depths, c10::nullopt,
                          tile_offsets, flatten_ids, width, height, tile_size, 0, {});
  check_binning(in);
  TORCH_CHECK_VALUE(K_max >= 1 && K_max <= kMaxContributors, "K_max must be in [1, ",
                    kMaxContributors, "], got ", K_max);
  TORCH_CHECK_VALUE(std::isfinite(tau_rel) && tau_rel >= 0, "tau_rel must be finite and >= 0, got ",
                    tau_rel);
  TORCH_CHECK_VALUE(std::isfinite(tau_abs) && tau_abs >= 0, "tau_abs must be finite and >= 0, got ",
                    tau_abs);
  const int64_t C = means2d.size(0);
  at::Tensor pix;
  if (pixels.has_value() && pixels->defined()) {
    check_shape(*pixels, "pixels", {C, -1, 2});
    check_int32(*pixels, "pixels");
    check_device(*pixels, "pixels", means2d.device());
    pix = pixels->contiguous();
    const int32_t* p = pix.data_ptr<int32_t>();
    for (int64_t i = 0; i < pix.numel(); i += 2) {
      const bool pad = p[i] == -1 && p[i + 1] == -1;
      TORCH_CHECK_VALUE(pad || (p[i] >= 0 && p[i] < width && p[i + 1] >= 0 && p[i + 1] < height),
                        "pixels must hold (x, y) inside the ", width, "x", height,
                        " image or (-1, -1) padding, got (", p[i], ", ", p[i + 1], ")");
    }
  }
  const int64_t P = pix.defined() ? pix.size(1) : height * width;
  const auto opts = means2d.options();
  const auto iopts = opts.dtype(at::kInt);
  at::Tensor ids = at::empty({C, P, K_max}, iopts), weights = at::empty({C, P, K_max}, opts),
             zs = at::empty({C, P, K_max}, opts), clusters = at::empty({C, P, K_max}, iopts),
             counts = at::empty({C, P}, iopts), n_render = at::empty({C, P}, iopts);
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "contributors_cpu", [&] {
    using T = scalar_t;
    const RasterArgs<T> a = make_raster_args<T>(in, width, height, tile_size, 0, {});
    const ContribOutputs<T> o{ids.data_ptr<int32_t>(),      weights.data_ptr<T>(),
                              zs.data_ptr<T>(),             clusters.data_ptr<int32_t>(),
                              counts.data_ptr<int32_t>(),   n_render.data_ptr<int32_t>()};
    const int32_t* p = pix.defined() ? pix.data_ptr<int32_t>() : nullptr;
    at::parallel_for(0, C * P, 64, [&](int64_t begin, int64_t end) {
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
