// Torch glue of rasterize_fwd on CUDA: checks, the device-side binning validation, allocation,
// the launch plan (gsrender/raster_plan.h: Tensor Core where it runs, else scalar) and the
// launchers of
// gsrender/launch/rasterize.h (kernels in csrc/cuda/rasterize_fwd_kernel.cu, csrc/cuda/rasterize_mma_fwd_kernel.cu).
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <atomic>

#include "cuda_glue.h"
#include "gsrender/launch/rasterize.h"

namespace gsrender {
namespace gpu {
namespace {

using at::Tensor;

// The plan's device workspaces (RasterPlan), sized once here by the launchers' own layouts for
// these inputs; rasterize_bwd allocates the backward's size the plan names.
RasterPlan size_workspaces(RasterPlan plan, const RasterInputs& in, int64_t width, int64_t height,
                           int64_t mode, at::ArrayRef<double> weight_params) {
  if (is_mma(plan.forward) || is_mma(plan.backward)) {  // float32 inputs only (mma_runs)
    const RasterArgs<float> a = make_raster_args<float>(in, width, height, mode, weight_params);
    if (is_mma(plan.forward))
      plan.forward_workspace =
          static_cast<int64_t>(launch::rasterize_mma_fwd_workspace_bytes(a, plan.forward));
    if (is_mma(plan.backward))
      plan.backward_workspace = static_cast<int64_t>(launch::rasterize_mma_bwd_workspace_bytes(a));
  }
  if (plan.backward == RasterKernel::kScalarDet)
    AT_DISPATCH_FLOATING_TYPES(in.means2d.scalar_type(), "rasterize_fwd_cuda", [&] {
      const launch::RasterBwdArgs<scalar_t> a{
          make_raster_args<scalar_t>(in, width, height, mode, weight_params), {}};
      plan.backward_workspace = static_cast<int64_t>(launch::rasterize_bwd_det_workspace_bytes(a));
    });
  return plan;
}

RasterFwdResult rasterize_fwd_cuda(
    const Tensor& means2d, const Tensor& conics, const Tensor& opacities, const Tensor& colors,
    const Tensor& depths, const c10::optional<Tensor>& backgrounds, const Tensor& tile_offsets,
    const Tensor& flatten_ids, int64_t width, int64_t height, int64_t tile_size, int64_t mode,
    at::ArrayRef<double> weight_params, c10::string_view precision, bool deterministic) {
  const RasterInputs in =
      check_raster_inputs(means2d, conics, opacities, colors, depths, backgrounds, tile_offsets,
                          flatten_ids, width, height, tile_size, mode, weight_params);
  check_cuda_tile_size(tile_size);
  const c10::cuda::CUDAGuard guard(means2d.device());
  const RasterPlan plan = size_workspaces(
      plan_rasterize(precision, mode, deterministic, cuda_raster_target(means2d, tile_size),
                     in.grid),
      in, width, height, mode, weight_params);
  validate_binning_cuda(in, nullptr, width, height, tile_size);
  const int64_t C = means2d.size(0), CH = colors.size(2);
  const auto [render, alphas, last_ids, aux, stats] =
      empty_raster_outputs(C, height, width, CH, means2d.options());
  TORCH_CHECK_VALUE(plan.grid.count < INT32_MAX, "rasterize_fwd: ", plan.grid.count,
                    " tiles exceed the grid");
  const cudaStream_t stream = current_stream();
  if (is_mma(plan.forward)) {
    const launch::RasterFwdArgs<float> a{
        make_raster_args<float>(in, width, height, mode, weight_params),
        {render.data_ptr<float>(), alphas.data_ptr<float>(), last_ids.data_ptr<int32_t>(),
         aux.data_ptr<float>(), stats.data_ptr<int64_t>()}};
    const ScratchBuffer ws(plan.forward_workspace, means2d.device());
    C10_CUDA_CHECK(launch::launch_rasterize_mma_fwd(a, plan.forward, ws.get(), stream));
    return {render, alphas, last_ids, aux, stats, plan_tensor(plan)};
  }
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "rasterize_fwd_cuda", [&] {
    using T = scalar_t;
    const launch::RasterFwdArgs<T> a{
        make_raster_args<T>(in, width, height, mode, weight_params),
        {render.data_ptr<T>(), alphas.data_ptr<T>(), last_ids.data_ptr<int32_t>(),
         aux.data_ptr<T>(), stats.data_ptr<int64_t>()}};
    C10_CUDA_CHECK(launch::launch_rasterize_fwd(a, stream));
  });
  return {render, alphas, last_ids, aux, stats, plan_tensor(plan)};
}

// A device's compute capability, queried once per device (not a sync, but a driver call that
// does not belong on every forward and backward).
int compute_capability_major(int device) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};  // 0 = not queried yet
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "CUDA device index ", device, " out of range");
  int major = cache[device].load(std::memory_order_relaxed);
  if (major == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    cache[device].store(major, std::memory_order_relaxed);
  }
  return major;
}

}  // namespace

RasterTarget cuda_raster_target(const at::Tensor& means2d, int64_t tile_size) {
  return {true, means2d.scalar_type() == at::kFloat, static_cast<int>(tile_size),
          compute_capability_major(means2d.device().index())};
}

}  // namespace gpu

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) { m.impl("rasterize_fwd", &gpu::rasterize_fwd_cuda); }

}  // namespace gsrender
