// The Tensor Core rasterizer's entry points (csrc/cuda/rasterize_mma_fwd.cu), called by the
// rasterize_fwd op when it applies; the scalar kernel covers everything else.
#pragma once
#include <ATen/ATen.h>

#include "raster_common.cuh"

namespace gsrender {
namespace gpu {

// The MMA kernel runs for a matrix impl with float32 inputs and 16×16 tiles on sm_80 or newer
// (float64 and other tile sizes take the exact scalar kernel).
bool mma_rasterizer_applies(const at::Tensor& means2d, int64_t tile_size, int64_t impl);

// colors [C, N, CH] (the float32 tensor p.colors points into); impl picks the operand type.
void launch_rasterize_mma_fwd(const RasterArgs<float>& p, const FwdOut<float>& o,
                              const at::Tensor& colors, int64_t impl, int64_t n_tiles,
                              cudaStream_t stream);

// The Tensor Core backward (csrc/cuda/rasterize_mma_bwd.cu): f16 / bf16 impls where the forward
// kernel applies; tf32 and everything else take the scalar backward.
bool mma_backward_applies(const at::Tensor& means2d, int64_t tile_size, int64_t impl);

// colors [C, N, CH] float32 (p.colors); bufs: rasterize_bwd's inputs and zeroed gradients.
void launch_rasterize_mma_bwd(const RasterArgs<float>& p, const at::Tensor& colors,
                              const RasterBwdTensors& bufs, int64_t impl, int64_t n_tiles,
                              cudaStream_t stream);

}  // namespace gpu
}  // namespace gsrender
