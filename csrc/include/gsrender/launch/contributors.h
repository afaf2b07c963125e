// Launcher of contributors (csrc/cuda/contributors_kernel.cu); torch-free, see
// gsrender/launch/common.h. T = float or double.
#pragma once
#include "gsrender/contributors_walk.h"
#include "gsrender/launch/common.h"

namespace gsrender {
namespace launch {

template <typename T>
struct ContributorsArgs {
  RasterArgs<T> in;       // sorted mode; colors / backgrounds unused
  const int32_t* pixels;  // [C, P, 2] (x, y), (-1, -1) = padding; nullptr = every pixel
  int64_t P, K;           // pixels per camera (H·W without a list), K_max
  T tau_rel, tau_abs;
  ContribOutputs<T> out;  // ids, weights, zs, clusters [C, P, K]; counts, n_render [C, P]
};

template <typename T>
cudaError_t launch_contributors(const ContributorsArgs<T>& a, cudaStream_t stream);

}  // namespace launch
}  // namespace gsrender
