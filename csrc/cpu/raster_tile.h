// One (camera, tile) task's list gathered once, and the GPU warp's 8×4-pixel sub-tiles packed to
// the Gaussians whose support box meets them: the CPU mirror of the CUDA kernels' work units
// (docs/design.md §5), used by the scalar baseline and the statistics ops.
// (The CPU matrix rasterizer works on 8-pixel row segments instead: row_tile.h.)
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "gsrender/alpha.h"
#include "gsrender/raster_args.h"
#include "gsrender/tiles.h"

namespace gsrender {
namespace cpu {

constexpr int kSubW = 8, kSubH = 4;

// One Gaussian of a tile's list, gathered once per tile (SoA would vectorise the α loop better;
// the exp dominates either way).
template <typename T>
struct TileGaussian {
  T mx, my, a, b, c, opacity, phi;  // phi: weighted mode's depth weight φ(z)
  PixelBox box;                     // pixels it can reach with α ≥ 1/255
  int32_t id;                       // flat index c*N + n
};

template <typename T>
void gather_tile(const RasterArgs<T>& a, int32_t start, int32_t end,
                 std::vector<TileGaussian<T>>& out) {
  out.resize(end - start);
  for (int32_t i = start; i < end; ++i) {
    TileGaussian<T>& g = out[i - start];
    const int32_t id = a.flatten_ids[i];
    g.id = id;
    g.mx = a.means2d[2 * id], g.my = a.means2d[2 * id + 1];
    g.a = a.conics[3 * id], g.b = a.conics[3 * id + 1], g.c = a.conics[3 * id + 2];
    g.opacity = a.opacities[id];
    g.phi = !a.sorted ? depth_weight<T>(a.depths[id], a.sigma_w, a.beta)
                                            : T(1);
    g.box = support_pixel_box<T>(g.mx, g.my, g.a, g.b, g.c, g.opacity);
  }
}

// The pixels of one 8×4 sub-tile; pixels outside the image or the tile are inactive.
struct SubTile {
  int x0, y0, x1, y1;  // inclusive pixel range actually inside image and tile
  int n_valid;
  bool valid(int p, int ox, int oy) const {
    const int x = ox + p % kSubW, y = oy + p / kSubW;
    return x <= x1 && y <= y1;
  }
};

// Calls fn(origin_x, origin_y, SubTile) for every sub-tile of tile (tx, ty).
template <typename Fn>
void for_each_subtile(int tx, int ty, int tile_size, int width, int height, Fn&& fn) {
  const int tx0 = tx * tile_size, ty0 = ty * tile_size;
  const int tx1 = std::min(tx0 + tile_size, width) - 1, ty1 = std::min(ty0 + tile_size, height) - 1;
  for (int oy = ty0; oy <= ty1; oy += kSubH)
    for (int ox = tx0; ox <= tx1; ox += kSubW) {
      SubTile st;
      st.x0 = ox, st.y0 = oy;
      st.x1 = std::min({ox + kSubW - 1, tx1}), st.y1 = std::min({oy + kSubH - 1, ty1});
      st.n_valid = (st.x1 - st.x0 + 1) * (st.y1 - st.y0 + 1);
      fn(ox, oy, st);
    }
}

// Sub-tile packing: positions (into the tile's list) of the Gaussians whose support box meets
// the sub-tile, in list (depth) order.
template <typename T>
void pack_subtile(const std::vector<TileGaussian<T>>& gs, int32_t n, const SubTile& st,
                  std::vector<int32_t>& packed) {
  packed.clear();
  for (int32_t i = 0; i < n; ++i)
    if (gs[i].box.meets(st.x0, st.y0, st.x1, st.y1)) packed.push_back(i);
}

}  // namespace cpu
}  // namespace gsrender
