// Launchers of bin_tiles and of the validation of untrusted binning arrays
// (csrc/cuda/binning_kernel.cu); torch-free, see gsrender/launch/common.h. T = float or double.
//
// Binning has one host sync, the number of intersections M that sizes its outputs, so it runs
// in two launches: launch_bin_count writes the inclusive prefix sum of the per-Gaussian tile
// counts (M = ends[C·N − 1]), the caller reads M and allocates flatten_ids [M], then
// launch_bin_sort emits, sorts and writes tile_offsets and flatten_ids.
#pragma once
#include "gsrender/launch/common.h"

namespace gsrender {
namespace launch {

template <typename T>
struct BinArgs {
  const T* means2d;      // [C, N, 2]
  const int32_t* radii;  // [C, N, 2]
  const T* depths;       // [C, N]
  int64_t C, N;
  int width, height, tile_size;
  bool sort;             // order each tile's run by depth (stable); Gaussian order otherwise
  // Exact binning (gsrender/support_ellipse.h): only the tiles the α ≥ 1/255 support ellipse
  // meets; nullptr (both) lists every tile of the radii box.
  const T* conics = nullptr;     // [C, N, 3]
  const T* opacities = nullptr;  // [C, N]
};

template <typename T>
size_t bin_count_workspace_bytes(const BinArgs<T>& a);
// ends [C·N] int64 out: inclusive prefix sum of the tile counts.
template <typename T>
cudaError_t launch_bin_count(const BinArgs<T>& a, int64_t* ends, Workspace ws,
                             cudaStream_t stream);

template <typename T>
size_t bin_sort_workspace_bytes(const BinArgs<T>& a, int64_t M);
// tile_offsets [C, TH, TW] int32 out, flatten_ids [M] int32 out (c·N + n).
template <typename T>
cudaError_t launch_bin_sort(const BinArgs<T>& a, const int64_t* ends, int64_t M,
                            int32_t* tile_offsets, int32_t* flatten_ids, Workspace ws,
                            cudaStream_t stream);

// The rules of the CPU's check_binning on the device: bits of *flags (a device int the launcher
// clears first), read back by the caller.
enum BinningFlaw : int { kBadOffsets = 1, kBadIds = 2, kBadLastIds = 4 };
struct ValidateBinningArgs {
  const int32_t* tile_offsets;  // [C, TH, TW]
  const int32_t* flatten_ids;   // [M]
  const int32_t* last_ids;      // [C, H, W] or nullptr
  int64_t C, N, M;
  int width, height, tile_size, TW, TH;
};
cudaError_t launch_validate_binning(const ValidateBinningArgs& a, int* flags,
                                    cudaStream_t stream);

}  // namespace launch
}  // namespace gsrender
