// Launcher of weight_stats (csrc/cuda/weight_stats_kernel.cu); torch-free, see
// gsrender/launch/common.h. T = float or double.
#pragma once
#include "gsrender/launch/common.h"
#include "gsrender/raster_args.h"

namespace gsrender {
namespace launch {

template <typename T>
struct WeightStatsArgs {
  RasterArgs<T> in;    // sorted mode; colors / backgrounds unused
  int64_t K;           // top_k, 0..64
  T tau_s;
  T* wsum;             // [N] out, zeroed by the caller
  T* wmax;             // [N] out, zeroed by the caller
  int32_t* n_views;    // [N] out
  int32_t* topk_ids;   // [C, H, W, K] out, filled with -1 by the caller
  T* topk_w;           // [C, H, W, K] out, zeroed by the caller
};

// Workspace: the [C, N] view-dominance flags, summed over views into n_views.
template <typename T>
size_t weight_stats_workspace_bytes(const WeightStatsArgs<T>& a);
template <typename T>
cudaError_t launch_weight_stats(const WeightStatsArgs<T>& a, Workspace ws, cudaStream_t stream);

}  // namespace launch
}  // namespace gsrender
