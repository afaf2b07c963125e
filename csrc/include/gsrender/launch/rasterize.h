// Launchers of the rasterize kernels (csrc/cuda/rasterize_*.cu): the scalar forward and
// backward (float / double, any tile size 1..16), the deterministic backward, and the Tensor
// Core forward (f16 / bf16 / tf32 operands) and backward (f16 / bf16), float32 with 16×16 tiles
// on sm_80+: the caller runs the kernel its plan names (gsrender/raster_plan.h). Torch-free, see
// gsrender/launch/common.h. The Tensor Core launchers do the operand preparation (per-channel
// scaling, conversion, padding) on the device, in their workspace.
#pragma once
#include "gsrender/launch/common.h"
#include "gsrender/raster_args.h"
#include "gsrender/raster_plan.h"

namespace gsrender {
namespace launch {

// One block per tile, one thread per pixel: blockDim = tile_size² rounded up to whole warps (the
// backward's warp reductions need full warps). 16×16 tiles give 256 threads, the launch bound
// every raster kernel is compiled for, so the CUDA backend takes tile_size 1..16.
constexpr int kMaxTileSize = 16;
constexpr int kMaxThreads = kMaxTileSize * kMaxTileSize;

inline int raster_threads(int tile_size) { return (tile_size * tile_size + 31) / 32 * 32; }

template <typename T>
int64_t raster_tiles(const RasterArgs<T>& p) {
  return p.C * p.TH * p.TW;
}

template <typename T>
struct RasterFwdArgs {
  RasterArgs<T> in;
  FwdOut<T> out;  // out.stats [C, 3] zeroed by the caller
};

// The scalar kernel.
template <typename T>
cudaError_t launch_rasterize_fwd(const RasterFwdArgs<T>& a, cudaStream_t stream);

// The Tensor Core kernel; kernel = kMmaF16 / kMmaBF16 / kMmaTF32 (where mma_runs, raster_plan.h).
// Workspace: the colours scaled per channel, converted to the operand type and padded to 16-byte
// rows, and the scales.
size_t rasterize_mma_fwd_workspace_bytes(const RasterArgs<float>& p, RasterKernel kernel);
cudaError_t launch_rasterize_mma_fwd(const RasterFwdArgs<float>& a, RasterKernel kernel,
                                     Workspace ws, cudaStream_t stream);

template <typename T>
struct RasterBwdArgs {
  RasterArgs<T> in;
  RasterBwdIO<T> io;  // gradients zeroed by the caller (v_depths stays 0 when sorted)
};

// The scalar backward (float atomics).
template <typename T>
cudaError_t launch_rasterize_bwd(const RasterBwdArgs<T>& a, cudaStream_t stream);

// deterministic=true (gsrender/det_reduce.h): the entry order (a stable device sort of
// flatten_ids), the part rows of one channel pass and the per-tile v_backgrounds rows live in
// the workspace; bitwise-reproducible.
template <typename T>
size_t rasterize_bwd_det_workspace_bytes(const RasterBwdArgs<T>& a);
template <typename T>
cudaError_t launch_rasterize_bwd_det(const RasterBwdArgs<T>& a, Workspace ws,
                                     cudaStream_t stream);

// The Tensor Core backward, kernel = kMmaF16 / kMmaBF16. Workspace: Ĝ, F̃, their scales and
// G·OUT (described in csrc/cuda/rasterize_mma_bwd_kernel.cu).
size_t rasterize_mma_bwd_workspace_bytes(const RasterArgs<float>& p);
cudaError_t launch_rasterize_mma_bwd(const RasterBwdArgs<float>& a, RasterKernel kernel,
                                     Workspace ws, cudaStream_t stream);

}  // namespace launch
}  // namespace gsrender
