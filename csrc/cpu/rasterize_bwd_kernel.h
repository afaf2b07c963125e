// The CPU backward rasterizer's kernel (rasterize_bwd_kernel.cpp), torch-free: rasterize_bwd.cpp,
// the op, checks the arguments, allocates what this writes and, with deterministic=true, plans
// the reduction (gsrender/det_reduce.h: a sort with ATen) and allocates each pass's rows.
#pragma once
#include <cstdint>

#include "gsrender/det_pass.h"
#include "gsrender/raster_args.h"
#include "row_tile.h"  // RowGaussian (both files that include this one read it whole)

namespace gsrender {
namespace cpu {

// The frame's RowGaussians into gs ([C·N], gaussian_array.h), read by both reductions below.
template <typename T>
void prepare_bwd_gaussians(const RasterArgs<T>& a, RowGaussian<T>* gs);

// The default reduction (no atomics; the same bits run to run for a given thread count): every
// gradient of io, added to its zeros. False when a tile touched a Gaussian outside the chunks its
// support box spans (an internal error: the gradients are then incomplete).
template <typename T>
bool backward_chunked(const RasterArgs<T>& a, const RowGaussian<T>* gs, const RasterBwdIO<T>& io);

// deterministic=true, one pass ps of the plan: every tile writes its entries' rows of part
// ([M, ps.stride], zeros in) and, when bg_part is given ([tiles, CH]: the first pass, with
// backgrounds), its v_backgrounds row; then each Gaussian's rows are summed in the plan's entry
// order (order, seg: DetPlan's) into io's gradients.
template <typename T>
void backward_det_pass(const RasterArgs<T>& a, const RowGaussian<T>* gs, const RasterBwdIO<T>& io,
                       const DetPass& ps, const int64_t* order, const int64_t* seg, T* part,
                       T* bg_part);

// deterministic=true: io.v_backgrounds from the first pass's per-tile rows bg_part, in tile order.
template <typename T>
void det_backgrounds(const RasterArgs<T>& a, const T* bg_part, const RasterBwdIO<T>& io);

}  // namespace cpu
}  // namespace gsrender
