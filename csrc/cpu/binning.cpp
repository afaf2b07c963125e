// Tile binning on the CPU: every (camera, tile, Gaussian) intersection, grouped by tile with a
// counting sort (stable), then ordered by depth inside each tile when sorting is asked for.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "gsrender/raster_checks.h"
#include "gsrender/tiles.h"

namespace gsrender {
namespace {

template <typename T>
std::tuple<at::Tensor, at::Tensor> bin_tiles_impl(const at::Tensor& means2d,
                                                  const at::Tensor& radii,
                                                  const at::Tensor& depths, int width,
                                                  int height, int tile_size, bool sort) {
  const int64_t C = means2d.size(0), N = means2d.size(1);
  const int TW = ceil_div(width, tile_size), TH = ceil_div(height, tile_size);
  const int64_t n_tiles = C * TH * TW;
  const T* m2d = means2d.data_ptr<T>();
  const int32_t* rad = radii.data_ptr<int32_t>();
  const T* dep = depths.data_ptr<T>();

  // Tile rectangle of every Gaussian (empty when culled or off-image).
  std::vector<int32_t> rect(C * N * 4);  // [C*N, 4]: tx0, ty0, tx1, ty1 (inclusive)
  std::vector<int64_t> count(C * N + 1, 0);
  at::parallel_for(0, C * N, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int32_t* r = &rect[4 * i];
      r[0] = 0, r[1] = 0, r[2] = -1, r[3] = -1;
      if (rad[2 * i] <= 0 && rad[2 * i + 1] <= 0) continue;
      const PixelBox b =
          pixel_box<T>(m2d[2 * i], m2d[2 * i + 1], rad[2 * i], rad[2 * i + 1], width, height);
      if (b.empty()) continue;
      r[0] = b.x0 / tile_size, r[1] = b.y0 / tile_size;
      r[2] = b.x1 / tile_size, r[3] = b.y1 / tile_size;
      count[i + 1] = int64_t(r[2] - r[0] + 1) * (r[3] - r[1] + 1);
    }
  });
  std::partial_sum(count.begin(), count.end(), count.begin());
  const int64_t M = count[C * N];
  TORCH_CHECK_VALUE(M < INT32_MAX, "bin_tiles: ", M, " tile intersections exceed int32 range");

  // Counting sort by tile: per-tile counts, prefix, then a stable scatter in Gaussian order.
  std::vector<int64_t> tile_count(n_tiles + 1, 0);
  for (int64_t i = 0; i < C * N; ++i) {
    const int32_t* r = &rect[4 * i];
    const int64_t cam = i / N;
    for (int ty = r[1]; ty <= r[3]; ++ty)
      for (int tx = r[0]; tx <= r[2]; ++tx) ++tile_count[cam * TH * TW + ty * TW + tx + 1];
  }
  std::partial_sum(tile_count.begin(), tile_count.end(), tile_count.begin());
  auto tile_offsets = at::empty({C, TH, TW}, radii.options());
  std::copy(tile_count.begin(), tile_count.end() - 1, tile_offsets.data_ptr<int32_t>());
  auto flatten_ids = at::empty({M}, radii.options());
  int32_t* ids = flatten_ids.data_ptr<int32_t>();
  std::vector<int64_t> cursor(tile_count.begin(), tile_count.end() - 1);
  for (int64_t i = 0; i < C * N; ++i) {
    const int32_t* r = &rect[4 * i];
    const int64_t cam = i / N;
    for (int ty = r[1]; ty <= r[3]; ++ty)
      for (int tx = r[0]; tx <= r[2]; ++tx)
        ids[cursor[cam * TH * TW + ty * TW + tx]++] = static_cast<int32_t>(i);
  }
  if (sort) {
    // Front to back inside each tile; ties keep Gaussian order (stable), as the reference does.
    at::parallel_for(0, n_tiles, 16, [&](int64_t begin, int64_t end) {
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
                                                 int64_t height, int64_t tile_size, bool sort) {
  check_bin_tiles_inputs(means2d, radii, depths, width, height, tile_size);
  std::tuple<at::Tensor, at::Tensor> out;
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "bin_tiles_cpu", [&] {
    out = bin_tiles_impl<scalar_t>(means2d.contiguous(), radii.contiguous(), depths.contiguous(),
                                   width, height, tile_size, sort);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(gsrender, CPU, m) { m.impl("bin_tiles", &bin_tiles_cpu); }

}  // namespace gsrender
