// Shared by the CPU and CUDA backends: the host/device qualifier and the constants of the
// rendering contract (docs/design.md §3).
#pragma once

#if defined(__CUDACC__)
#define GSR_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GSR_HOST_DEVICE inline
#endif

// GSR_CPU_BACKEND (setup.py, on the CPU backend's C++ sources only): host-only shortcuts in
// shared headers are keyed on it, not on the absence of __CUDA_ARCH__, so that the kernels'
// host SIMT build (tools/simt, -DGSR_SIMT) compiles exactly the device's code paths.

// Unroll hint for loops with a compile-time trip count (so small arrays stay in registers);
// device pass only, so host compilers never see an unknown pragma.
#if defined(__CUDA_ARCH__)
#define GSR_UNROLL _Pragma("unroll")
#else
#define GSR_UNROLL
#endif

namespace gsrender {

// The thresholds are double so that T(k) is the correctly rounded value in float AND double
// (a float constant widened to double would be 0.99000000953… in the float64 kernels).
// A (pixel, Gaussian) pair contributes iff alpha >= kAlphaMin = 1/255. Code that needs the
// reciprocal (the support level ln(255·o) of packing, radii and binning) uses kAlphaMinInv, so
// 255·o stays one exact multiply; changing the cut means changing kAlphaMinInv only.
constexpr double kAlphaMinInv = 255.0;
constexpr double kAlphaMin = 1.0 / kAlphaMinInv;
// alpha = min(kAlphaMax, o * exp(-sigma)).
constexpr double kAlphaMax = 0.99;
// A pixel stops at the first Gaussian where T * (1 - alpha) < kTransmittanceMin.
constexpr double kTransmittanceMin = 1e-4;

}  // namespace gsrender
