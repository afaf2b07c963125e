// Torch glue of rasterize_bwd on CUDA: checks, the device-side binning validation, the zeroed
// gradient buffers, the backward kernel the forward's plan names (gsrender/raster_plan.h) and
// the launchers of gsrender/launch/rasterize.h (kernels in
// csrc/cuda/rasterize_bwd_kernel.cu, csrc/cuda/rasterize_mma_bwd_kernel.cu).
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <tuple>

#include "cuda_glue.h"
#include "gsrender/launch/rasterize.h"

namespace gsrender {
namespace gpu {
namespace {

using at::Tensor;

// A launcher's result: cudaErrorInvalidValue is what it returns before launching when the
// workspace is smaller than its layout for these inputs, i.e. the plan was made for others.
void check_launch(cudaError_t err, const RasterPlan& plan) {
  TORCH_CHECK_VALUE(err != cudaErrorInvalidValue, "plan: its backward workspace (",
                    plan.backward_workspace, " bytes) does not fit these inputs, or the launch "
                    "was refused: pass the plan rasterize_fwd returned for them");
  C10_CUDA_CHECK(err);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> rasterize_bwd_cuda(
    const Tensor& means2d, const Tensor& conics, const Tensor& opacities, const Tensor& colors,
    const Tensor& depths, const c10::optional<Tensor>& backgrounds, const Tensor& tile_offsets,
    const Tensor& flatten_ids, int64_t width, int64_t height, int64_t tile_size, int64_t mode,
    at::ArrayRef<double> weight_params, const Tensor& render, const Tensor& alphas,
    const Tensor& last_ids, const Tensor& aux, const Tensor& v_render, const Tensor& v_alphas,
    const Tensor& plan) {
  const RasterInputs in =
      check_raster_inputs(means2d, conics, opacities, colors, depths, backgrounds, tile_offsets,
                          flatten_ids, width, height, tile_size, mode, weight_params);
  check_raster_grads(in, width, height, render, alphas, last_ids, aux, v_render, v_alphas);
  check_cuda_tile_size(tile_size);
  const c10::cuda::CUDAGuard guard(means2d.device());
  const RasterPlan p =
      planned_backward(plan, mode, cuda_raster_target(means2d, tile_size), in.grid);
  const RasterKernel kernel = p.backward;
  validate_binning_cuda(in, &last_ids, width, height, tile_size);
  const RasterBwdTensors bufs =
      prepare_raster_bwd(in, render, alphas, last_ids, aux, v_render, v_alphas);
  TORCH_CHECK_VALUE(p.grid.count < INT32_MAX, "rasterize_bwd: ", p.grid.count,
                    " tiles exceed the grid");
  const cudaStream_t stream = current_stream();
  if (is_mma(kernel)) {
    const launch::RasterBwdArgs<float> a{
        make_raster_args<float>(in, width, height, mode, weight_params),
        bufs.io<float>()};
    const ScratchBuffer ws(p.backward_workspace, means2d.device());
    check_launch(launch::launch_rasterize_mma_bwd(a, kernel, ws.get(), stream), p);
    return bufs.grads();
  }
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "rasterize_bwd_cuda", [&] {
    using T = scalar_t;
    const launch::RasterBwdArgs<T> a{
        make_raster_args<T>(in, width, height, mode, weight_params), bufs.io<T>()};
    if (kernel == RasterKernel::kScalarDet) {
      const ScratchBuffer ws(p.backward_workspace, means2d.device());
      check_launch(launch::launch_rasterize_bwd_det(a, ws.get(), stream), p);
    } else {
      C10_CUDA_CHECK(launch::launch_rasterize_bwd(a, stream));
    }
  });
  return bufs.grads();
}

}  // namespace
}  // namespace gpu

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) { m.impl("rasterize_bwd", &gpu::rasterize_bwd_cuda); }

}  // namespace gsrender
