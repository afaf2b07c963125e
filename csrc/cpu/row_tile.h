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

// One Gaussian as the row rasterizer reads it, computed once per frame (not per tile pair).
template <typename T>
struct RowGaussian {
  T mx, my, a, b, c, opacity, phi;  // phi: weighted mode's depth weight φ(z)
  double level;                     // ln(255·o): the support ellipse is σ ≤ level
  PixelBox box;                     // pixels it can reach with α ≥ 1/255 (support_pixel_box)
};

template <typename T>
std::vector<RowGaussian<T>> prepare_gaussians(const RasterArgs<T>& a) {
  std::vector<RowGaussian<T>> gs(a.C * a.N);
  cpu::parallel_for(0, a.C * a.N, 2048, [&](int64_t begin, int64_t end) {
    for (int64_t id = begin; id < end; ++id) {
      RowGaussian<T>& g = gs[id];
      g.mx = a.means2d[2 * id], g.my = a.means2d[2 * id + 1];
      g.a = a.conics[3 * id], g.b = a.conics[3 * id + 1], g.c = a.conics[3 * id + 2];
      g.opacity = a.opacities[id];
      g.phi = !a.sorted ? depth_weight<T>(a.depths[id], a.sigma_w, a.beta) : T(1);
      g.level = support_level<double>(g.opacity);
      g.box = support_pixel_box<T>(g.mx, g.my, g.a, g.b, g.c, g.opacity);
    }
  });
  return gs;
}

struct TileRows {
  int x0, y0, x1, y1;                      // the tile's pixels inside the image (inclusive)
  std::vector<int32_t> keep;               // [kept, 3]: list position, first row, last row
  std::vector<int32_t> row_start, row_fill, items;  // per row, kept positions covering it

  template <typename T>
  void build(const RasterArgs<T>& a, const RowGaussian<T>* gs, int tx, int ty, int32_t start,
             int32_t end) {
    x0 = tx * a.tile_size, y0 = ty * a.tile_size;
    x1 = std::min(x0 + a.tile_size, a.width) - 1, y1 = std::min(y0 + a.tile_size, a.height) - 1;
    const int n_rows = y1 - y0 + 1;
    const int32_t* ids = a.flatten_ids + start;
    keep.clear();
    row_start.assign(n_rows + 1, 0);
    for (int32_t i = 0; i < end - start; ++i) {
      const RowGaussian<T>& g = gs[ids[i]];
      if (!g.box.meets(x0, y0, x1, y1) ||
          !support_meets_rect<double>(g.mx, g.my, g.a, g.b, g.c, g.level, x0, y0, x1, y1))
        continue;
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
