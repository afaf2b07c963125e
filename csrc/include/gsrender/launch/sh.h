// Launchers of sh_fwd / sh_bwd (csrc/cuda/sh_kernel.cu); torch-free, see
// gsrender/launch/common.h. T = float or double.
#pragma once
#include "gsrender/launch/common.h"

namespace gsrender {
namespace launch {

template <typename T>
struct ShFwdArgs {
  int degree;         // 0..3
  int64_t C, N, K;    // K >= (degree + 1)²
  const T* dirs;      // [C, N, 3]
  const T* coeffs;    // [N, K, 3]
  T* colors;          // [C, N, 3] out
};

template <typename T>
cudaError_t launch_sh_fwd(const ShFwdArgs<T>& a, cudaStream_t stream);

template <typename T>
struct ShBwdArgs {
  int degree;
  int64_t C, N, K;
  const T* dirs;      // [C, N, 3]
  const T* coeffs;    // [N, K, 3]
  const T* v_colors;  // [C, N, 3]
  T* v_dirs;          // [C, N, 3] out
  T* v_coeffs;        // [N, K, 3] out, zeroed by the caller
};

template <typename T>
cudaError_t launch_sh_bwd(const ShBwdArgs<T>& a, cudaStream_t stream);

}  // namespace launch
}  // namespace gsrender
