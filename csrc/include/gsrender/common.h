// Shared by the CPU and CUDA backends: the host/device qualifier and the constants of the
// rendering contract (DESIGN §3).
#pragma once

#if defined(__CUDACC__)
#define GSR_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GSR_HOST_DEVICE inline
#endif

namespace gsrender {

// A (pixel, Gaussian) pair contributes iff alpha >= 1/255.
constexpr float kAlphaMin = 1.0f / 255.0f;
// alpha = min(kAlphaMax, o * exp(-sigma)).
constexpr float kAlphaMax = 0.99f;
// A pixel stops at the first Gaussian where T * (1 - alpha) < kTransmittanceMin.
constexpr float kTransmittanceMin = 1e-4f;

enum class RasterMode : int { kSorted = 0, kWeighted = 1 };
enum class RasterImpl : int { kMatrix = 0, kScalar = 1 };

}  // namespace gsrender
