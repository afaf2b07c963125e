// Tile binning's two parallel steps (binning.cpp is the op): listing every (camera, tile, Gaussian)
// pair, the exact support test included, and the depth sort inside each tile.
#include "binning_kernel.h"

#include <algorithm>
#include <vector>

#include "gsrender/raster_plan.h"
#include "gsrender/support_ellipse.h"
#include "isa.h"
#include "key_sort.h"

namespace gsrender {
namespace cpu {
namespace {

// Tile rectangle r = [tx0, ty0, tx1, ty1] (inclusive) of Gaussian i's radii box; false when it
// is culled or off-image.
template <typename T>
bool tile_rect(const BinInputs<T>& in, int64_t i, int32_t* r) {
  if (in.radii[2 * i] <= 0 && in.radii[2 * i + 1] <= 0) return false;
  const PixelBox b = pixel_box<T>(in.means2d[2 * i], in.means2d[2 * i + 1], in.radii[2 * i],
                                  in.radii[2 * i + 1], in.width, in.height);
  if (b.empty()) return false;
  // pixel -> tile: a shift for power-of-two tiles, not four integer divisions (pixels are >= 0)
  const auto tile = [&](int p) { return in.tile_shift >= 0 ? p >> in.tile_shift : p / in.tile_size; };
  r[0] = tile(b.x0), r[1] = tile(b.y0), r[2] = tile(b.x1), r[3] = tile(b.y1);
  return true;
}

}  // namespace

template <typename T>
void list_pairs(const BinInputs<T>& in, std::vector<std::vector<int32_t>>& block_tiles,
                int32_t* count) {
  const int64_t CN = in.C * in.N, n_blocks = static_cast<int64_t>(block_tiles.size());
  const TileGrid grid = make_tile_grid(in.C, in.width, in.height, in.tile_size);
  const int TW = grid.tiles_x, TH = grid.tiles_y;
  cpu::parallel_tasks(n_blocks, [&](auto take) {
    std::vector<int32_t> scratch;  // this thread's block, copied out at its exact size
    for (int64_t b; (b = take()) < n_blocks;) {
      size_t used = 0;
      const int64_t first = b * kBlock;
      int32_t base = static_cast<int32_t>((first / in.N) * TH * TW);  // the camera's first tile
      int64_t next_camera = (first / in.N + 1) * in.N;
      for (int64_t i = first, end = std::min(CN, first + kBlock); i < end; ++i) {
        int32_t r[4];
        if (i == next_camera) base += TH * TW, next_camera += in.N;  // (no division per Gaussian)
        if (!tile_rect(in, i, r)) {
          count[i] = 0;
          continue;
        }
        const size_t room = used + size_t(r[2] - r[0] + 1) * size_t(r[3] - r[1] + 1);
        if (scratch.size() < room) scratch.resize(std::max(2 * scratch.size(), room));
        int32_t* const slot = scratch.data() + used;
        int32_t n = 0;
        for_each_bin_candidate<T>(r, in.means2d, in.conics, in.opacities, i, in.tile_size,
                                  in.width, in.height, [&](int tx, int ty, bool meets) {
                                    slot[n] = base + ty * TW + tx;
                                    n += meets;
                                  });
        count[i] = n;
        used += n;
      }
      block_tiles[b].assign(scratch.begin(), scratch.begin() + used);
    }
  });
}

template <typename T>
void sort_tiles_by_depth(const T* depths, const int32_t* offs, int32_t* ids, int64_t M,
                         int64_t n_tiles) {
  // Tiles handed out one at a time (their lengths vary).
  using K = cpu::DepthKey<T>;
  const T* dep = depths;
  cpu::parallel_tasks(n_tiles, [&](auto take) {
    std::vector<K> keys, tkeys;
    std::vector<int32_t> tids;
    for (int64_t t; (t = take()) < n_tiles;) {
      const int64_t s = offs[t], n = (t + 1 < n_tiles ? offs[t + 1] : M) - s;
      if (n < 2) continue;
      if (static_cast<int64_t>(keys.size()) < n) keys.resize(n), tkeys.resize(n), tids.resize(n);
      for (int64_t j = 0; j < n; ++j) keys[j] = cpu::depth_order_key(dep[ids[s + j]]);
      cpu::stable_sort_by_key(keys.data(), ids + s, n, tkeys.data(), tids.data());
    }
  });
}

template void list_pairs<float>(const BinInputs<float>&, std::vector<std::vector<int32_t>>&, int32_t*);
template void list_pairs<double>(const BinInputs<double>&, std::vector<std::vector<int32_t>>&, int32_t*);
template void sort_tiles_by_depth<float>(const float*, const int32_t*, int32_t*, int64_t, int64_t);
template void sort_tiles_by_depth<double>(const double*, const int32_t*, int32_t*, int64_t, int64_t);

}  // namespace cpu
}  // namespace gsrender
