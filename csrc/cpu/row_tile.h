// The row rasterizer's tile setup, shared by the CPU forward and backward: every Gaussian's
// per-frame constants once (not once per tile pair), and per (camera, tile) the Gaussians whose
// support ellipse meets the tile (the exact test of gsrender/support_ellipse.h, not the box),
// bucketed by the tile rows their support box covers, in list (depth) order.
#pragma once
#include "isa.h"

#include <algorithm>
#include <vector>

#include "gsrender/raster_checks.h"
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
    }
  });
  return gs;
}

// The 8-pixel segments of one tile row, pixels [x0, x1] of row y: each segment's pixel centres and
// the lanes inside the row. The forward and backward row walks share this set-up and walk().
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

  // The row's Gaussians front to back (items: tile-list positions, ids: the tile's run of
  // flatten_ids): f(i, id, g, dy, sg) for every segment g's support box covers, dy = my − py,
  // until done() says the row needs no more.
  template <class Done, class F>
  __attribute__((always_inline)) void walk(const RowGaussian<T>* gs, const int32_t* ids,
                                           const int32_t* items, int n_items, const Done& done,
                                           const F& f) const {
    for (int j = 0; j < n_items && !done(); ++j) {
      const int32_t i = items[j], id = ids[i];
      const RowGaussian<T>& g = gs[id];
      const int lo = std::max(g.box.x0, x0), hi = std::min(g.box.x1, x1);
      if (lo > hi) continue;
      const T dy = g.my - py;
      for (int sg = (lo - x0) / kLanes; sg <= (hi - x0) / kLanes; ++sg) f(i, id, g, dy, sg);
    }
  }
};

struct TileRows {
  int x0, y0, x1, y1;                      // the tile's pixels inside the image (inclusive)
  std::vector<int32_t> keep;               // [kept, 3]: list position, first row, last row
  std::vector<int32_t> row_start, row_fill, items;  // per row, kept positions covering it

  template <typename T>
  void build(const RasterArgs<T>& a, const RowGaussian<T>* gs, int tx, int ty, int32_t start,
             int32_t end) {
    const PixelBox px = tile_pixels(tx, ty, a.tile_size, a.width, a.height);
    x0 = px.x0, y0 = px.y0, x1 = px.x1, y1 = px.y1;
    const int n_rows = y1 - y0 + 1;
    const int32_t* ids = a.flatten_ids + start;
    keep.clear();
    row_start.assign(n_rows + 1, 0);
    for (int32_t i = 0; i < end - start; ++i) {
      const RowGaussian<T>& g = gs[ids[i]];
      if (!support_meets_tile<T>(g, px)) continue;  // bin_tiles with conics dropped it already
      const int r0 = std::max(g.box.y0, y0) - y0, r1 = std::min(g.box.y1, y1) - y0;
      keep.insert(keep.end(), {i, r0, r1});
      for (int r = r0; r <= r1; ++r) ++row_start[r + 1];
    }
    for (int r = 0; r < n_rows; ++r) row_start[r + 1] += row_start[r];
    items.resize(row_start[n_rows]);
    row_fill.assign(row_start.begin(), row_start.end() - 1);
    for (size_t k = 0; k < keep.size(); k += 3)
      for (int r = keep[k + 1]; r <= keep[k + 2]; ++r) items[row_fill[r]++] = keep[k];
  }
};

}  // namespace cpu
}  // namespace gsrender
