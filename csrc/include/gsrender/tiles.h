// Which pixels a projected Gaussian can touch, and a tile's pixels (the grid itself:
// gsrender/raster_plan.h make_tile_grid). Shared by binning, packing and
// both backends, so the image never depends on tile size or packing (docs/design.md §3 "Support").
#pragma once
#include <cmath>

#include "gsrender/alpha.h"
#include "gsrender/common.h"

namespace gsrender {

// Inclusive pixel-index range [x0, x1] × [y0, y1] whose pixel centres (x+0.5, y+0.5) lie inside
// the box mean ± radius, clipped to the image. Empty when x0 > x1 or y0 > y1.
struct PixelBox {
  int x0, y0, x1, y1;
  GSR_HOST_DEVICE bool empty() const { return x0 > x1 || y0 > y1; }
  GSR_HOST_DEVICE bool meets(int bx0, int by0, int bx1, int by1) const {
    return x0 <= bx1 && x1 >= bx0 && y0 <= by1 && y1 >= by0;
  }
};

// Pixels (unclipped) whose centre lies in the exact region where the Gaussian's α can reach
// 1/255 (support_extent); empty when no pixel can contribute. Packing uses it on both backends,
// so a sub-tile drops a Gaussian only when none of its pixels could see it.
template <typename T>
GSR_HOST_DEVICE PixelBox support_pixel_box(T mx, T my, T a, T b, T c, T opacity) {
  T ex, ey;
  if (!support_extent<T>(a, b, c, opacity, &ex, &ey)) return {0, 0, -1, -1};
  return {static_cast<int>(ceil(mx - ex - T(0.5))), static_cast<int>(ceil(my - ey - T(0.5))),
          static_cast<int>(floor(mx + ex - T(0.5))), static_cast<int>(floor(my + ey - T(0.5)))};
}

template <typename T>
GSR_HOST_DEVICE PixelBox pixel_box(T mx, T my, int rx, int ry, int width, int height) {
  PixelBox b;
  // centre c = x + 0.5 reaches iff |c - m| <= r  <=>  m - r - 0.5 <= x <= m + r - 0.5
  b.x0 = static_cast<int>(ceil(mx - static_cast<T>(rx) - T(0.5)));
  b.x1 = static_cast<int>(floor(mx + static_cast<T>(rx) - T(0.5)));
  b.y0 = static_cast<int>(ceil(my - static_cast<T>(ry) - T(0.5)));
  b.y1 = static_cast<int>(floor(my + static_cast<T>(ry) - T(0.5)));
  b.x0 = b.x0 < 0 ? 0 : b.x0;
  b.y0 = b.y0 < 0 ? 0 : b.y0;
  b.x1 = b.x1 > width - 1 ? width - 1 : b.x1;
  b.y1 = b.y1 > height - 1 ? height - 1 : b.y1;
  return b;
}

// The last pixel, along one axis of extent pixels, of the tile whose first pixel is first.
GSR_HOST_DEVICE int tile_last_pixel(int first, int tile_size, int extent) {
  return (first + tile_size < extent ? first + tile_size : extent) - 1;
}

// The pixels of tile (tx, ty) inside the image.
GSR_HOST_DEVICE PixelBox tile_pixels(int tx, int ty, int tile_size, int width, int height) {
  const int x0 = tx * tile_size, y0 = ty * tile_size;
  return {x0, y0, tile_last_pixel(x0, tile_size, width), tile_last_pixel(y0, tile_size, height)};
}

}  // namespace gsrender
