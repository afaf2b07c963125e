// Composition-weight statistics (SplitGS-Loc, docs/design.md §7): for C views, per Gaussian Σw and max w
// over every pixel of every view, the number of views in which it dominates some pixel
// (w > tau_s), and per pixel the top-K contributors. w = α·T exactly as the sorted renderer
// (gsrender/alpha.h: 1/255 cut, 0.99 clamp, 1e-4 early stop), walking the same tile lists.
// Parallel over the tiles of one view at a time; every thread accumulates into its own buffers,
// merged after each view, so no two threads ever write the same memory.
#include "pixel_contraction.h"  // first: it sets the compile options of all that follows
#include "weight_stats_kernel.h"

#include <algorithm>
#include <vector>

#include "gsrender/composite.h"
#include "gsrender/topk.h"
#include "isa.h"
#include "raster_tile.h"

namespace gsrender {
namespace cpu {
namespace {

template <typename T>
struct StatsScratch {
  std::vector<TileGaussian<T>> gs;
  std::vector<double> wsum;    // [N] Σw (double: sums over many pixels and views)
  std::vector<T> wmax;         // [N]
  std::vector<uint8_t> dom;    // [N] dominates some pixel in the current view
};

template <typename T>
void stats_tile(const RasterArgs<T>& a, int64_t cam, int tx, int ty, T tau_s, int64_t K,
                StatsScratch<T>& s, T* topk_w, int32_t* topk_ids) {
  const int x0 = tx * a.tile_size, y0 = ty * a.tile_size;
  const int32_t n = static_cast<int32_t>(s.gs.size());
  for (int y = y0; y < std::min(y0 + a.tile_size, a.height); ++y)
    for (int x = x0; x < std::min(x0 + a.tile_size, a.width); ++x) {
      const int64_t pix = (cam * a.height + y) * a.width + x;
      T* kw = topk_w + pix * K;
      int32_t* kid = topk_ids + pix * K;
      const T px = x + T(0.5), py = y + T(0.5);
      Compositor<T> comp{true};
      for (int32_t i = 0; i < n; ++i) {
        const TileGaussian<T>& g = s.gs[i];
        // outside its support box no pixel reaches α ≥ 1/255 (the packing rule)
        if (x < g.box.x0 || x > g.box.x1 || y < g.box.y0 || y > g.box.y1) continue;
        const T alpha =
            pair_alpha<T>(g.opacity, gaussian_sigma<T>(g.a, g.b, g.c, g.mx - px, g.my - py));
        if (alpha == T(0)) continue;
        T w;
        if (!comp.take(alpha, T(0), &w)) break;
        const int64_t gid = g.id - cam * a.N;
        s.wsum[gid] += w;
        if (w > s.wmax[gid]) s.wmax[gid] = w;
        if (w > tau_s) s.dom[gid] = 1;
        topk_insert(w, static_cast<int32_t>(gid), K, kw, kid);
      }
    }
}

}  // namespace

template <typename T>
void weight_stats_views(const RasterArgs<T>& a, double tau_s, int64_t K,
                        const WeightStatsOut<T>& o) {
  const int64_t C = a.C, N = a.N;
  const int nthreads = num_threads();
  std::vector<StatsScratch<T>> scratch(nthreads);
  for (auto& s : scratch) s.wsum.assign(N, 0.0), s.wmax.assign(N, T(0)), s.dom.assign(N, 0);
  T* pw = o.topk_w;
  int32_t* pid = o.topk_ids;
  int32_t* nv = o.nviews;
  const int64_t tiles = int64_t(a.TH) * a.TW;
  for (int64_t cam = 0; cam < C; ++cam) {
    cpu::parallel_for(0, tiles, 1, [&](int64_t begin, int64_t end) {
      StatsScratch<T>& s = scratch[thread_num()];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t ct = cam * tiles + t;
        gather_tile(a, a.tile_start(ct), a.tile_end(ct), s.gs);
        stats_tile(a, cam, int(t % a.TW), int(t / a.TW), T(tau_s), K, s, pw, pid);
      }
    });
    // a view counts once per Gaussian however many threads saw it dominate
    for (int64_t g = 0; g < N; ++g) {
      uint8_t d = 0;
      for (auto& s : scratch) d |= s.dom[g], s.dom[g] = 0;
      nv[g] += d;
    }
  }
  T* ps = o.wsum;
  T* pm = o.wmax;
  for (int64_t g = 0; g < N; ++g) {
    double sum = 0;
    T mx = 0;
    for (auto& s : scratch) sum += s.wsum[g], mx = std::max(mx, s.wmax[g]);
    ps[g] = static_cast<T>(sum), pm[g] = mx;
  }
}

template void weight_stats_views<float>(const RasterArgs<float>&, double, int64_t,
                                        const WeightStatsOut<float>&);
template void weight_stats_views<double>(const RasterArgs<double>&, double, int64_t,
                                         const WeightStatsOut<double>&);

}  // namespace cpu
}  // namespace gsrender
