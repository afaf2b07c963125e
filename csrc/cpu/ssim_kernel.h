// The SSIM map's CPU kernels (ssim_kernel.cpp), torch-free: ssim.cpp, the ops ssim_fwd /
// ssim_bwd, checks the arguments and allocates what these write. Images are channel-last
// [B, H, W, CH], contiguous; window [2r + 1].
#pragma once
#include <cstdint>

namespace gsrender {
namespace cpu {

constexpr int kSsimMoments = 5;  // mx, my, sxx, syy, sxy

// ssim [B, H, W, CH] and the blurred moments [5, B·CH, H, W] the backward reads.
template <typename T>
void ssim_fwd_images(const T* x, const T* y, const T* window, int r, double c1, double c2,
                     int64_t B, int64_t H, int64_t W, int64_t CH, T* ssim, T* moments);

// v_x [B, H, W, CH] and, unless v_y is nullptr (y the target of a loss), v_y, from ssim_fwd's
// moments and the upstream v_ssim; window_reversed: the window flipped (the blur's adjoint).
template <typename T>
void ssim_bwd_images(const T* x, const T* y, const T* window_reversed, int r, double c1,
                     double c2, int64_t B, int64_t H, int64_t W, int64_t CH, const T* moments,
                     const T* v_ssim, T* v_x, T* v_y);

}  // namespace cpu
}  // namespace gsrender
