// The row rasterizer's tile setup, shared by the CPU forward and backward: every Gaussian's
// per-frame constants once (not once per tile pair), and per (camera, tile) the Gaussians whose
// support ellipse meets the tile (the exact test of gsrender/support_ellipse.h, not the box),
// bucketed by the tile rows their support box covers, in list (depth) order.
#pragma once
#include "isa.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gsrender/raster_interface.h"
#include "gsrender/support_ellipse.h"
#include "gsrender/tiles.h"
#include "lanes.h"

namespace gsrender {
namespace cpu {

constexpr int kMaxSegments = 256 / kLanes;  // 8-pixel row segments per tile row (tile_size <= 256)

// One Gaussian as the row rasterizer reads it, computed once per frame (not per tile pair): its
// support (gsrender/support_ellipse.h: mean, conic, ln(255·o), the pixels it can reach with
// α ≥ 1/255), opacity and the weighted mode's depth weight φ(z).
template <typename T>
struct RowGaussian : Support<T> {
  T opacity, phi;
  // Its support on one image row: dᵀQd ≤ support_bound at dx = k·dy ± sqrt(r0 − r1·dy²), the
  // pixel-centre x where the tile test's ellipse crosses the row (r0 < 0: no pixel contributes).
  double k, r0, r1;
};

// The rows' support interval constants of g (RowGaussian::k, r0, r1), in double as the tile test.
template <typename T>
void set_row_support(RowGaussian<T>& g) {
  const double a = g.a, b = g.b, c = g.c, det = std::fma(a, c, -(b * b));
  g.k = 0, g.r0 = -1, g.r1 = 0;
  if (!(g.level > 0) || !(det > 0) || !(a > 0)) return;  // support_meets_rect: no pixel
  g.k = b / a, g.r0 = support_bound(a, c, det, g.level) / a, g.r1 = det / (a * a);
}

// Tile-local copy of a kept Gaussian (TileRows::build): the row walks read the tile's Gaussians
// in order instead of gathering them from the frame's array at random.
template <typename T>
struct TileEntry {
  RowGaussian<T> g;
  int32_t i, id;  // its tile-list position and flat id
};

template <typename T>
std::vector<RowGaussian<T>> prepare_gaussians(const RasterArgs<T>& a) {
  std::vector<RowGaussian<T>> gs(a.C * a.N);
  cpu::parallel_for(0, a.C * a.N, 2048, [&](int64_t begin, int64_t end) {
    for (int64_t id = begin; id < end; ++id) {
      RowGaussian<T>& g = gs[id];
      g.opacity = a.opacities[id];
      static_cast<Support<T>&>(g) =
          make_support<T>(a.means2d[2 * id], a.means2d[2 * id + 1], a.conics[3 * id],
                          a.conics[3 * id + 1], a.conics[3 * id + 2], g.opacity);
      g.phi = !a.sorted ? depth_weight<T>(a.depths[id], a.sigma_w, a.beta) : T(1);
      set_row_support(g);
    }
  });
  return gs;
}

// The 8-pixel segments of one tile row, pixels [x0, x1] of row y: each segment's pixel centres and
// the lanes inside the row. The forward and backward row scans share this set-up and bucket().
template <typename T>
struct RowSegments {
  using V = typename Lanes<T>::V;
  using M = typename Lanes<T>::M;
  int x0, x1, n;           // n segments, the last one partial when the row is not a multiple of 8
  T py;                    // the row's pixel-centre y
  V px[kMaxSegments];      // pixel-centre x per lane
  M inside[kMaxSegments];  // −1 on lanes inside [x0, x1]

  RowSegments(int x0_, int x1_, int y) : x0(x0_), x1(x1_), n((x1_ - x0_) / kLanes + 1) {
    V lane{};
    M lane_i{};
    for (int i = 0; i < kLanes; ++i) lane[i] = T(i), lane_i[i] = i;
    py = T(y) + T(0.5);
    for (int sg = 0; sg < n; ++sg) {
      const int sx = x0 + sg * kLanes;
      px[sg] = lane + (T(sx) + T(0.5));
      inside[sg] = (lane_i + sx) <= x1;
    }
  }
  int first_pixel(int sg) const { return x0 + sg * kLanes; }
  int width(int sg) const { return std::min(kLanes, x1 - first_pixel(sg) + 1); }

  // The row's Gaussians bucketed by segment, each bucket front to back (items: positions in the
  // tile's entries): list[sg·cap + q], q < count[sg], the entries whose support ellipse crosses
  // the row inside segment sg. The crossing is the tile test's, widened by 1e-3 px for the double
  // rounding here, so no pixel the kernels would light is missed; a segment it misses has no lane
  // with α ≥ 1/255 and is never evaluated. Segment by segment, a scan keeps its transmittance in
  // registers and stops on its own saturation.
  void bucket(const TileEntry<T>* es, const int32_t* items, int n_items, int32_t* list,
              size_t cap, int* count) const {
    for (int sg = 0; sg < n; ++sg) count[sg] = 0;
    // Branch-free per item (whether and where a Gaussian crosses a row is data, not a pattern the
    // branch predictor learns): an empty crossing gives s0 > s1.
    for (int j = 0; j < n_items; ++j) {
      const int32_t k = items[j];
      const RowGaussian<T>& g = es[k].g;
      const double dyd = double(g.my) - double(py), r2 = g.r0 - g.r1 * dyd * dyd;
      const double r = std::sqrt(std::max(r2, 0.0)) + 1e-3, cx = double(g.mx) + g.k * dyd - 0.5;
      const double lo = std::ceil(std::max({cx - r, double(g.box.x0), double(x0)}));
      const double hi = std::floor(std::min({cx + r, double(g.box.x1), double(x1)}));
      const bool none = !(r2 >= 0) || !(lo <= hi);  // no pixel centre of the row inside
      // (clamped to the row before the conversion: lo, hi are only meaningful when !none)
      const int s0 = (int(std::min(lo, double(x1))) - x0) / kLanes;
      const int s1 = none ? -1 : (int(std::max(hi, double(x0))) - x0) / kLanes;
      if (n <= 4) {  // tiles up to 32 px (the default 16: 2 segments): every segment, no branch
        for (int sg = 0; sg < n; ++sg) {
          list[sg * cap + count[sg]] = k;
          count[sg] += (sg >= s0) & (sg <= s1);
        }
      } else {
        for (int sg = s0; sg <= s1; ++sg) list[sg * cap + count[sg]++] = k;
      }
    }
  }
};

template <typename T>
struct TileRows {
  int x0, y0, x1, y1;                      // the tile's pixels inside the image (inclusive)
  std::vector<TileEntry<T>> kept;          // the Gaussians kept, in list (depth) order
  std::vector<int32_t> span;               // [kept, 2]: first and last row of each
  std::vector<int32_t> row_start, row_fill, items;  // per row, kept entries covering it

  // prefetch_features: fetch every kept Gaussian's feature row here (the forward passes false:
  // it copies them, TileFeatures).
  void build(const RasterArgs<T>& a, const RowGaussian<T>* gs, int tx, int ty, int32_t start,
             int32_t end, bool prefetch_features = true) {
    const PixelBox px = tile_pixels(tx, ty, a.tile_size, a.width, a.height);
    x0 = px.x0, y0 = px.y0, x1 = px.x1, y1 = px.y1;
    const int n_rows = y1 - y0 + 1;
    const int32_t* ids = a.flatten_ids + start;
    const int32_t n = end - start;
    kept.clear(), span.clear();
    row_start.assign(n_rows + 1, 0);
    for (int32_t i = 0; i < n; ++i) {
      // The list is in depth order, so gs is read at random: fetch ahead of the test.
      constexpr int kAhead = 8;
      if (i + kAhead < n) {
        const char* p = reinterpret_cast<const char*>(gs + ids[i + kAhead]);
        __builtin_prefetch(p), __builtin_prefetch(p + sizeof(RowGaussian<T>) - 1);
      }
      const RowGaussian<T>& g = gs[ids[i]];
      if (!support_meets_tile<T>(g, px)) continue;  // bin_tiles with conics dropped it already
      const int r0 = std::max(g.box.y0, y0) - y0, r1 = std::min(g.box.y1, y1) - y0;
      kept.push_back({g, i, ids[i]});
      span.insert(span.end(), {r0, r1});
      for (int r = r0; r <= r1; ++r) ++row_start[r + 1];
      // its feature row, read by the accumulation after the rows' scans
      if (prefetch_features) prefetch_feature_row(a, ids[i]);
    }
    for (int r = 0; r < n_rows; ++r) row_start[r + 1] += row_start[r];
    items.resize(row_start[n_rows]);
    row_fill.assign(row_start.begin(), row_start.end() - 1);
    for (size_t k = 0; k < kept.size(); ++k)
      for (int r = span[2 * k]; r <= span[2 * k + 1]; ++r) items[row_fill[r]++] = int32_t(k);
  }

  static void prefetch_feature_row(const RasterArgs<T>& a, int32_t id) {
    const uintptr_t f = reinterpret_cast<uintptr_t>(a.colors + int64_t(id) * a.CH);
    const uintptr_t last = f + uintptr_t(a.CH) * sizeof(T) - 1;
    for (uintptr_t line = f & ~uintptr_t(63); line <= last; line += 64)
      __builtin_prefetch(reinterpret_cast<const void*>(line));
  }
};

// The tile's kept Gaussians' feature rows copied into one contiguous block, in list order (row k:
// entry k). The segments' accumulations then read a kept × CH block that stays in L2 and is
// walked in increasing address order, which the hardware prefetcher follows, instead of rows
// scattered over the frame's [N, CH] features (random lines, and a TLB miss each on wide rows).
// The copy's loads are independent of each other, so many are in flight at once. (Fetching them
// row by row during the scans instead, to overlap the latency with the α arithmetic, measured
// slower: the per-row passes over the row lists cost more than they hid.)
template <typename T>
struct TileFeatures {
  std::vector<T> rows;

  void gather(const RasterArgs<T>& a, const TileRows<T>& tr) {
    using V = typename Lanes<T>::V;
    const size_t n = tr.kept.size(), CH = size_t(a.CH), n_vec = CH / kLanes;
    if (rows.size() < n * CH) rows.resize(n * CH);
    constexpr size_t kAhead = 4;
    for (size_t k = 0; k < n; ++k) {
      if (k + kAhead < n) TileRows<T>::prefetch_feature_row(a, tr.kept[k + kAhead].id);
      const T* src = a.colors + int64_t(tr.kept[k].id) * a.CH;
      T* dst = rows.data() + k * CH;
      // whole vectors, then the tail (a runtime-length memcpy would be a library call per row)
      for (size_t v = 0; v < n_vec; ++v) {
        V x;
        std::memcpy(&x, src + v * kLanes, sizeof(V));
        std::memcpy(dst + v * kLanes, &x, sizeof(V));
      }
      for (size_t c = n_vec * kLanes; c < CH; ++c) dst[c] = src[c];
    }
  }
  const T* row(int32_t k, int64_t CH) const { return rows.data() + k * CH; }
};

}  // namespace cpu
}  // namespace gsrender
