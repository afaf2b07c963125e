// The CPU forward rasterizer's kernel (rasterize_fwd_kernel.cpp), torch-free: rasterize_fwd.cpp,
// the op, checks the arguments and allocates what this writes.
#pragma once
#include <cstdint>

#include "gsrender/raster_args.h"

namespace gsrender {
namespace cpu {

template <typename T>
struct RowGaussian;

// Every (camera, tile) of the frame, n_tiles of them, into o (o.stats: [C, 3], added to). gs:
// [C·N] for the frame's RowGaussians (gaussian_array.h) to run the matrix kernel, or nullptr for
// the scalar baseline. T = float or double.
template <typename T>
void rasterize_fwd_tiles(const RasterArgs<T>& a, const FwdOut<T>& o, RowGaussian<T>* gs,
                         int64_t n_tiles);

}  // namespace cpu
}  // namespace gsrender
