// The SH ops' CPU kernels (sh_kernel.cpp), torch-free: sh.cpp, the ops, checks the arguments and
// allocates what these write. Every array contiguous; T = float or double.
#pragma once
#include <cstdint>

namespace gsrender {
namespace cpu {

// sh_fwd: colors [C, N, 3] from view directions dirs [C, N, 3] and coefficients [N, K, 3].
template <typename T>
void sh_fwd_gaussians(int64_t degree, const T* dirs, const T* coeffs, int64_t C, int64_t N,
                      int64_t K, T* colors);

// sh_bwd: v_dirs [C, N, 3] and v_coeffs [N, K, 3] (zeros in) from v_colors [C, N, 3].
template <typename T>
void sh_bwd_gaussians(int64_t degree, const T* dirs, const T* coeffs, const T* v_colors,
                      int64_t C, int64_t N, int64_t K, T* v_dirs, T* v_coeffs);

// Whether sh_channels_fwd found the coefficients and the features finite.
struct ShChannelsFinite {
  bool coeffs = true, features = true;
};

// sh_channels_fwd: out [C, N, 4 + D] (the clamped SH colour of means [N, 3] seen from campos
// [C, 3], depths [C, N], then features [N, D] or, per_camera, [C, N, D]; nullptr when D = 0).
template <typename T>
ShChannelsFinite sh_channels_fwd_gaussians(int64_t degree, const T* means, const T* campos,
                                           const T* coeffs, const T* depths, const T* features,
                                           bool per_camera, int64_t C, int64_t N, int64_t K,
                                           int64_t D, T* out);

// sh_channels_bwd: v_means [N, 3], v_coeffs [N, K, 3] and v_campos [C, 3] (written whole) from
// v_channels [C, N, CH] (its first three channels: the colour's).
template <typename T>
void sh_channels_bwd_gaussians(int64_t degree, const T* means, const T* campos, const T* coeffs,
                               const T* v_channels, int64_t C, int64_t N, int64_t K, int64_t CH,
                               T* v_means, T* v_coeffs, T* v_campos);

}  // namespace cpu
}  // namespace gsrender
