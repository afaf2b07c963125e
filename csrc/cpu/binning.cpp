// Tile binning on the CPU: every (camera, tile, Gaussian) intersection — of the radii box, and
// with conics and opacities only the tiles the α ≥ 1/255 support ellipse meets
// (gsrender/support_ellipse.h, the rule the CUDA binning runs too) — grouped by tile with a
// parallel counting sort (stable), then ordered by depth inside each tile when sorting is asked
// for (a stable radix sort on depth keys). Every step is parallel; the lists are the same for
// any thread count: each tile's Gaussians in Gaussian order, then stably by depth.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "gsrender/host_alloc.h"
#include "gsrender/raster_interface.h"
#include "gsrender/support_ellipse.h"
#include "host_blocks.h"
#include "isa.h"
#include "key_sort.h"

namespace gsrender {
namespace {

// Binning arrays of one call, on the host.
template <typename T>
struct BinInputs {
  const T* means2d;       // [C, N, 2]
  const int32_t* radii;   // [C, N, 2]
  const T* depths;        // [C, N]
  const T* conics;        // [C, N, 3] or nullptr (box binning)
  const T* opacities;     // [C, N] with conics
  int64_t C, N;
  int width, height, tile_size;
  int tile_shift;  // log2(tile_size) for a power of two, else −1
};

int tile_shift_of(int tile_size) {
  return (tile_size & (tile_size - 1)) == 0 ? __builtin_ctz(static_cast<unsigned>(tile_size)) : -1;
}

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

// Gaussians per binning block: the unit the threads take one at a time while listing pairs.
constexpr int64_t kBlock = 2048;

// Each block's pairs (the tile of every pair, in Gaussian order) and each Gaussian's pair count:
// the exact test runs once per candidate tile, in parallel, blocks handed out one at a time.
// Every candidate tile is written to the next slot, which only a pair keeps: no branch per tile
// on the test's outcome (~14 % of the candidates fail it at random).
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
std::tuple<at::Tensor, at::Tensor> bin_tiles_impl(const BinInputs<T>& in, const at::Tensor& radii,
                                                  bool sort) {
  const int64_t CN = in.C * in.N;
  const TileGrid grid = make_tile_grid(in.C, in.width, in.height, in.tile_size);
  const int TW = grid.tiles_x, TH = grid.tiles_y;
  const int64_t n_tiles = grid.count;
  TORCH_CHECK_VALUE(n_tiles < INT32_MAX, "bin_tiles: ", n_tiles, " tiles (cameras × tiles per "
                    "image) exceed int32 range");

  const int64_t n_blocks = (CN + kBlock - 1) / kBlock;
  std::vector<std::vector<int32_t>> block_tiles(n_blocks);
  HostVector<int32_t> count(CN);  // (1M Gaussians: 4 MB, a cached block)
  list_pairs(in, block_tiles, count.data());
  std::vector<int64_t> block_start(n_blocks + 1, 0);  // pairs before each block
  for (int64_t b = 0; b < n_blocks; ++b)
    block_start[b + 1] = block_start[b] + static_cast<int64_t>(block_tiles[b].size());
  const int64_t M = block_start[n_blocks];
  TORCH_CHECK_VALUE(M < INT32_MAX, "bin_tiles: ", M, " tile intersections exceed int32 range");

  // Stable counting sort by tile, in parallel: P parts, each a run of consecutive blocks with
  // about M/P pairs, count their pairs per tile; a part's pairs of tile t go after tile t's pairs
  // of the parts before it, so every tile lists its Gaussians in Gaussian order, whatever P is.
  // (At most one part per ~16 pairs of a tile on average: the per-part counts are P·n_tiles.)
  const int64_t P = std::max<int64_t>(
      1, std::min<int64_t>({at::get_num_threads(), n_blocks, M / std::max<int64_t>(1, 16 * n_tiles)}));
  std::vector<int64_t> part_block(P + 1);
  for (int64_t p = 0; p <= P; ++p)
    part_block[p] = std::lower_bound(block_start.begin(), block_start.end() - 1, p * M / P) -
                    block_start.begin();
  part_block[P] = n_blocks;
  std::vector<int32_t> cursor(P * n_tiles, 0);  // [P, n_tiles]: counts, then write positions
  cpu::parallel_for(0, P, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t b = part_block[p]; b < part_block[p + 1]; ++b)
        for (const int32_t t : block_tiles[b]) ++cursor[p * n_tiles + t];
  });
  at::Tensor tile_offsets = at::empty({in.C, TH, TW}, radii.options());
  int32_t* offs = tile_offsets.data_ptr<int32_t>();
  int32_t pos = 0;
  for (int64_t t = 0; t < n_tiles; ++t) {
    offs[t] = pos;
    for (int64_t p = 0; p < P; ++p) pos += std::exchange(cursor[p * n_tiles + t], pos);
  }
  at::Tensor flatten_ids = empty_host({M}, radii.options());
  int32_t* ids = flatten_ids.data_ptr<int32_t>();
  cpu::parallel_for(0, P, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      int32_t* cur = &cursor[p * n_tiles];
      for (int64_t b = part_block[p]; b < part_block[p + 1]; ++b) {
        const int32_t* t = block_tiles[b].data();
        for (int64_t i = b * kBlock, end = std::min(CN, i + kBlock); i < end; ++i)
          for (const int32_t* e = t + count[i]; t < e;) ids[cur[*t++]++] = static_cast<int32_t>(i);
        std::vector<int32_t>().swap(block_tiles[b]);  // done with it: free as we go
      }
    }
  });

  if (sort) {
    // Front to back inside each tile; ties keep Gaussian order (a stable sort on depth keys), as
    // the reference does. Tiles handed out one at a time (their lengths vary).
    using K = cpu::DepthKey<T>;
    const T* dep = in.depths;
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
  return {tile_offsets, flatten_ids};
}

std::tuple<at::Tensor, at::Tensor> bin_tiles_cpu(const at::Tensor& means2d,
                                                 const at::Tensor& radii,
                                                 const at::Tensor& depths, int64_t width,
                                                 int64_t height, int64_t tile_size, bool sort,
                                                 const c10::optional<at::Tensor>& conics,
                                                 const c10::optional<at::Tensor>& opacities) {
  check_bin_tiles_inputs(means2d, radii, depths, width, height, tile_size, conics, opacities);
  const at::Tensor m2d = means2d.contiguous(), rad = radii.contiguous(), dep = depths.contiguous();
  const at::Tensor con = conics ? conics->contiguous() : at::Tensor();
  const at::Tensor opa = opacities ? opacities->contiguous() : at::Tensor();
  std::tuple<at::Tensor, at::Tensor> out;
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "bin_tiles_cpu", [&] {
    using T = scalar_t;
    const BinInputs<T> in{m2d.data_ptr<T>(), rad.data_ptr<int32_t>(), dep.data_ptr<T>(),
                          con.defined() ? con.data_ptr<T>() : nullptr,
                          opa.defined() ? opa.data_ptr<T>() : nullptr,
                          means2d.size(0), means2d.size(1), static_cast<int>(width),
                          static_cast<int>(height), static_cast<int>(tile_size),
                          tile_shift_of(static_cast<int>(tile_size))};
    out = bin_tiles_impl<T>(in, rad, sort);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(gsrender, CPU, m) { m.impl("bin_tiles", &bin_tiles_cpu); }

}  // namespace gsrender
