// One pixel's contributor walk of the VODA contributors op (docs/design.md §7 step 1), GSR_HOST_DEVICE
// and torch-free: the CPU backend, the CUDA kernel and the launch layer share it, so both
// backends list the same entries with the same weights and clusters.
#pragma once
#include <cstdint>

#include "gsrender/alpha.h"
#include "gsrender/common.h"
#include "gsrender/composite.h"
#include "gsrender/raster_args.h"

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
  Compositor<T> comp{true};
  T zprev = 0;
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
    // the renderer excludes the Gaussian that would push T below 1e-4, and everything after it
    stopped = stopped || comp.crosses_stop(alpha);
    const int64_t e = out * K + k;
    o.ids[e] = static_cast<int32_t>(id % a.N);
    o.weights[e] = comp.advance(alpha);
    o.zs[e] = z;
    o.clusters[e] = cluster;
    zprev = z, ++k;
    n_render += !stopped;
  }
  close_list(o, out, K, k, n_render);
}

}  // namespace gsrender
