// The CPU tile binning's kernels (binning_kernel.cpp), torch-free: binning.cpp, the op, checks
// the arguments, allocates the outputs and runs the counting sort between these two steps.
#pragma once
#include <cstdint>
#include <vector>

namespace gsrender {
namespace cpu {

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

// Gaussians per binning block: the unit the threads take one at a time while listing pairs.
constexpr int64_t kBlock = 2048;

// Each block's pairs (the tile of every pair, in Gaussian order) and each Gaussian's pair count:
// the exact test runs once per candidate tile, in parallel, blocks handed out one at a time.
// Every candidate tile is written to the next slot, which only a pair keeps: no branch per tile
// on the test's outcome (~14 % of the candidates fail it at random).
template <typename T>
void list_pairs(const BinInputs<T>& in, std::vector<std::vector<int32_t>>& block_tiles,
                int32_t* count);

// Front to back inside each tile's run of ids (tile_offsets offs, [n_tiles]; M ids in all); ties
// keep Gaussian order (a stable sort on depth keys), as the reference does.
template <typename T>
void sort_tiles_by_depth(const T* depths, const int32_t* offs, int32_t* ids, int64_t M,
                         int64_t n_tiles);

}  // namespace cpu
}  // namespace gsrender
