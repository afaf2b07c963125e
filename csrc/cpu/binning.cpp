// Tile binning on the CPU: every (camera, tile, Gaussian) intersection — of the radii box, and
// with conics and opacities only the tiles the α ≥ 1/255 support ellipse meets
// (gsrender/support_ellipse.h, the rule the CUDA binning runs too) — grouped by tile with a
// counting sort (stable), then ordered by depth inside each tile when sorting is asked for.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "gsrender/raster_interface.h"
#include "gsrender/support_ellipse.h"
#include "isa.h"

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
};

// Tile rectangle r = [tx0, ty0, tx1, ty1] (inclusive) of Gaussian i's radii box; false when it
// is culled or off-image.
template <typename T>
bool tile_rect(const BinInputs<T>& in, int64_t i, int32_t* r) {
  if (in.radii[2 * i] <= 0 && in.radii[2 * i + 1] <= 0) return false;
  const PixelBox b = pixel_box<T>(in.means2d[2 * i], in.means2d[2 * i + 1], in.radii[2 * i],
                                  in.radii[2 * i + 1], in.width, in.height);
  if (b.empty()) return false;
  r[0] = b.x0 / in.tile_size, r[1] = b.y0 / in.tile_size;
  r[2] = b.x1 / in.tile_size, r[3] = b.y1 / in.tile_size;
  return true;
}

template <typename T>
int64_t bin_pairs(const BinInputs<T>& in, int64_t i, const int32_t* r, int64_t* out) {
  const int TW = ceil_div(in.width, in.tile_size), TH = ceil_div(in.height, in.tile_size);
  const int64_t base = (i / in.N) * TH * TW;
  return for_each_bin_tile<T>(r, in.means2d, in.conics, in.opacities, i, in.tile_size, in.width,
                              in.height, [&](int tx, int ty) {
                                if (out) *out++ = base + int64_t(ty) * TW + tx;
                              });
}

template <typename T>
std::tuple<at::Tensor, at::Tensor> bin_tiles_impl(const BinInputs<T>& in, const at::Tensor& radii,
                                                  bool sort) {
  const int64_t CN = in.C * in.N;
  const int TW = ceil_div(in.width, in.tile_size), TH = ceil_div(in.height, in.tile_size);
  const int64_t n_tiles = in.C * TH * TW;

  // Pairs per Gaussian (the exact test runs here, in parallel), then each Gaussian's pair tiles
  // at its prefix offset: the pairs in Gaussian order.
  std::vector<int32_t> rect(CN * 4);  // [C*N, 4]: tx0, ty0, tx1, ty1 (empty when culled)
  std::vector<int64_t> count(CN + 1, 0);
  cpu::parallel_for(0, CN, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int32_t* r = &rect[4 * i];
      if (!tile_rect(in, i, r)) r[0] = 0, r[1] = 0, r[2] = -1, r[3] = -1;
      count[i + 1] = bin_pairs(in, i, r, nullptr);
    }
  });
  std::partial_sum(count.begin(), count.end(), count.begin());
  const int64_t M = count[CN];
  TORCH_CHECK_VALUE(M < INT32_MAX, "bin_tiles: ", M, " tile intersections exceed int32 range");
  std::vector<int64_t> pair_tile(M);
  cpu::parallel_for(0, CN, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) bin_pairs(in, i, &rect[4 * i], &pair_tile[count[i]]);
  });

  // Counting sort by tile: per-tile counts, prefix, then a stable scatter in Gaussian order.
  std::vector<int64_t> tile_count(n_tiles + 1, 0);
  for (int64_t k = 0; k < M; ++k) ++tile_count[pair_tile[k] + 1];
  std::partial_sum(tile_count.begin(), tile_count.end(), tile_count.begin());
  at::Tensor tile_offsets = at::empty({in.C, TH, TW}, radii.options());
  std::copy(tile_count.begin(), tile_count.end() - 1, tile_offsets.data_ptr<int32_t>());
  at::Tensor flatten_ids = at::empty({M}, radii.options());
  int32_t* ids = flatten_ids.data_ptr<int32_t>();
  std::vector<int64_t> cursor(tile_count.begin(), tile_count.end() - 1);
  for (int64_t i = 0; i < CN; ++i)
    for (int64_t k = count[i]; k < count[i + 1]; ++k)
      ids[cursor[pair_tile[k]]++] = static_cast<int32_t>(i);
  if (sort) {
    // Front to back inside each tile; ties keep Gaussian order (stable), as the reference does.
    const T* dep = in.depths;
    cpu::parallel_for(0, n_tiles, 16, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        std::stable_sort(ids + tile_count[t], ids + tile_count[t + 1],
                         [dep](int32_t a, int32_t b) { return dep[a] < dep[b]; });
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
                          static_cast<int>(height), static_cast<int>(tile_size)};
    out = bin_tiles_impl<T>(in, rad, sort);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(gsrender, CPU, m) { m.impl("bin_tiles", &bin_tiles_cpu); }

}  // namespace gsrender
