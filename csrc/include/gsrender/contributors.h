// The VODA contributors op (DESIGN §7 step 1), shared by the CPU and CUDA backends: argument
// checks and one pixel's walk down its tile's depth-ordered list (GSR_HOST_DEVICE), so both
// backends list the same entries with the same weights and clusters.
#pragma once
#include <ATen/ATen.h>

#include <cmath>
#include <utility>

#include "gsrender/alpha.h"
#include "gsrender/checks.h"
#include "gsrender/common.h"
#include "gsrender/raster_checks.h"

namespace gsrender {

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
GSR_HOST_DEVICE void close_list(const ContribOutputs<T>& o, int64_t out, int64_t K, int32_t k,
                                int32_t n_render) {
  for (int64_t e = out * K + k; e < (out + 1) * K; ++e)
    o.ids[e] = -1, o.weights[e] = T(0), o.zs[e] = T(0), o.clusters[e] = -1;
  o.counts[out] = k;
  o.n_render[out] = n_render;
}

// One pixel's walk down its tile's depth-ordered list. Past the renderer's stop (T·(1−α) <
// 1e-4) the walk goes on (T keeps shrinking) while entries stay in the cluster that was open at
// the stop: the Gaussians behind the saturating front of a surface belong to it too.
template <typename T>
GSR_HOST_DEVICE void pixel_contributors(const RasterArgs<T>& a, int64_t cam, int x, int y, int64_t K, T tau_rel,
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

// Validates the op's arguments (the raster checks with depths standing in for the one channel
// the op reads) and returns the inputs plus the contiguous pixel list (undefined = every pixel).
// The pixel values are checked on the host: a CUDA pixel list is copied back once for it.
inline std::pair<RasterInputs, at::Tensor> check_contributors_inputs(
    const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& opacities,
    const at::Tensor& depths, const at::Tensor& tile_offsets, const at::Tensor& flatten_ids,
    int64_t width, int64_t height, int64_t tile_size, const c10::optional<at::Tensor>& pixels,
    int64_t K_max, double tau_rel, double tau_abs) {
  // depths first: it also stands in for the raster checks' channel tensor below (the one
  // channel this op reads), whose errors would otherwise name `colors`
  check_shape(means2d, "means2d", {-1, -1, 2});
  check_floating(means2d, "means2d");
  check_shape(depths, "depths", {means2d.size(0), means2d.size(1)});
  check_float(depths, "depths", means2d.scalar_type());
  const RasterInputs in =
      check_raster_inputs(means2d, conics, opacities, depths.unsqueeze(-1), depths, c10::nullopt,
                          tile_offsets, flatten_ids, width, height, tile_size, 0, {});
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
    const at::Tensor host = pix.cpu();
    const int32_t* p = host.data_ptr<int32_t>();
    for (int64_t i = 0; i < pix.numel(); i += 2) {
      const bool pad = p[i] == -1 && p[i + 1] == -1;
      TORCH_CHECK_VALUE(pad || (p[i] >= 0 && p[i] < width && p[i + 1] >= 0 && p[i + 1] < height),
                        "pixels must hold (x, y) inside the ", width, "x", height,
                        " image or (-1, -1) padding, got (", p[i], ", ", p[i + 1], ")");
    }
  }
  return {in, pix};
}

}  // namespace gsrender
