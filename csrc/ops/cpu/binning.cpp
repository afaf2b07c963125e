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

#include "cpu/binning_kernel.h"
#include "gsrender/host_alloc.h"
#include "gsrender/raster_interface.h"
#include "cpu/host_blocks.h"
#include "cpu/isa.h"

namespace gsrender {
namespace {

using cpu::BinInputs;
using cpu::kBlock;

int tile_shift_of(int tile_size) {
  return (tile_size & (tile_size - 1)) == 0 ? __builtin_ctz(static_cast<unsigned>(tile_size)) : -1;
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
  cpu::list_pairs(in, block_tiles, count.data());
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
      1, std::min<int64_t>({cpu::num_threads(), n_blocks, M / std::max<int64_t>(1, 16 * n_tiles)}));
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

  if (sort) cpu::sort_tiles_by_depth(in.depths, offs, ids, M, n_tiles);
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
