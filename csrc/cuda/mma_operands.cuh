// The Tensor Core kernels' operand preparation on the device (the launchers of
// rasterize_mma_fwd.cu and rasterize_mma_bwd.cu run it in their workspace, with no host sync):
// per-channel (or global) max |x| scales and the conversion of scaled rows to the operand type,
// padded with zeros to 16-byte rows. Every step rounds as the ATen expressions the launchers
// used before did (IEEE division and product, round-to-nearest conversion), also under
// --use_fast_math.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "gsrender/launch/common.h"

namespace gsrender {
namespace gpu {
namespace {  // internal linkage: each including kernel TU gets its own kernels
namespace operands {

constexpr int kThreads = 256;

// Element (r, c) of a [rows, CH] float source after its optional per-row divisor and
// per-channel multiplier: x / row_div[r] · col_mul[c].
struct Source {
  const float* x;
  int64_t rows, CH;
  const float* row_div = nullptr;  // [rows]
  const float* col_mul = nullptr;  // [CH]
  __device__ __forceinline__ float at(int64_t r, int64_t c) const {
    float v = x[r * CH + c];
    if (row_div) v = __fdiv_rn(v, row_div[r]);
    if (col_mul) v = __fmul_rn(v, col_mul[c]);
    return v;
  }
};

// A max |value| as its bit pattern: non-negative floats order like their bits (NaN above inf,
// so a NaN propagates as ATen's amax does and becomes scale 1 below, as its where(s > 0) did).
__device__ __forceinline__ unsigned abs_bits(float v) { return __float_as_uint(fabsf(v)); }

// bits[per_channel ? c : 0] = max |src(r, c)|. Thread t walks elements t, t + S, ... with S a
// multiple of CH, so every thread stays on one channel and adds one atomicMax. bits zeroed first.
__global__ void absmax_kernel(Source src, bool per_channel, int64_t S, unsigned* bits) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= S) return;
  const int64_t c = t % src.CH;
  unsigned m = 0;
  for (int64_t i = t; i < src.rows * src.CH; i += S) {
    const unsigned b = abs_bits(src.at(i / src.CH, c));
    m = b > m ? b : m;
  }
  if (m != 0) atomicMax(bits + (per_channel ? c : 0), m);
}

// In place: max bits → the scale (the max, or 1 where it is 0 or NaN).
__global__ void finish_scale_kernel(int64_t n, unsigned* bits) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float s = __uint_as_float(bits[i]);
  reinterpret_cast<float*>(bits)[i] = s > 0.0f ? s : 1.0f;
}

template <typename T>
__device__ __forceinline__ T to_operand(float v);
template <>
__device__ __forceinline__ float to_operand<float>(float v) { return v; }  // tf32: rounded in the MMA loop

// f16 / bf16 bits; Bf16 selects the format.
template <bool kBf16>
struct Bits16 {
  uint16_t v;
};
template <>
__device__ __forceinline__ Bits16<false> to_operand<Bits16<false>>(float v) {
  return {__half_as_ushort(__float2half_rn(v))};
}
template <>
__device__ __forceinline__ Bits16<true> to_operand<Bits16<true>>(float v) {
  return {__bfloat16_as_ushort(__float2bfloat16_rn(v))};
}

// dst [rows, CHp] = to_operand(src(r, c) / (col_div ? col_div[c] : *all_div)), 0 for c ≥ CH.
template <typename T>
__global__ void convert_kernel(Source src, const float* col_div, const float* all_div,
                               int64_t CHp, T* dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= src.rows * CHp) return;
  const int64_t r = i / CHp, c = i % CHp;
  dst[i] = c < src.CH ? to_operand<T>(__fdiv_rn(src.at(r, c), col_div ? col_div[c] : *all_div))
                      : to_operand<T>(0.0f);
}

inline unsigned blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// scale [per_channel ? CH : 1] = max |src| (per channel or over everything), 1 where 0 / NaN.
inline cudaError_t absmax_scale(const Source& src, bool per_channel, float* scale,
                                cudaStream_t stream) {
  const int64_t n = per_channel ? src.CH : 1;
  unsigned* bits = reinterpret_cast<unsigned*>(scale);
  GSR_CUDA_TRY(cudaMemsetAsync(bits, 0, sizeof(unsigned) * n, stream));
  const int64_t S = src.CH * (((int64_t(1) << 16) + src.CH - 1) / src.CH);
  if (src.rows * src.CH > 0) {
    GSR_LAUNCH(blocks(S), kThreads, 0, stream, absmax_kernel)(src, per_channel, S, bits);
    GSR_CUDA_TRY(cudaGetLastError());
  }
  GSR_LAUNCH(blocks(n), kThreads, 0, stream, finish_scale_kernel)(n, bits);
  return cudaGetLastError();
}

// dst rows in the operand type T (float, Bits16<false> = f16, Bits16<true> = bf16).
template <typename T>
cudaError_t convert(const Source& src, const float* col_div, const float* all_div, int64_t CHp,
                    void* dst, cudaStream_t stream) {
  if (src.rows * CHp == 0) return cudaSuccess;
  GSR_LAUNCH(blocks(src.rows * CHp), kThreads, 0, stream, convert_kernel<T>)(src, col_div, all_div, CHp,
                                                                     static_cast<T*>(dst));
  return cudaGetLastError();
}

// Channels padded to 16-byte rows: a multiple of 4 (float) or 8 (16-bit) elements.
inline int64_t padded_channels(int64_t CH, int64_t elem_bytes) {
  const int64_t per16 = 16 / elem_bytes;
  return (CH + per16 - 1) / per16 * per16;
}

}  // namespace operands
}  // namespace
}  // namespace gpu
}  // namespace gsrender
