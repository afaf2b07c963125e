// The CPU rasterizer's accumulation OUT = Wᵀ·F per 8-pixel row segment (docs/design.md §4), register-
// blocked so an 8-pixel × kChanRegs-channel accumulator stays in vector registers. Feature rows
// are given by pointer, so only the contributing Gaussians' rows are ever read (lazy fetch).
#pragma once
#include <cstdint>
#include <cstring>

#include "lanes.h"

namespace gsrender {
namespace cpu {

constexpr int kChanRegs = 12;  // accumulators per register block (AVX2 has 16 vector registers)

// acc[c0 .. c0+NB) = Σ_j w[j] · rows[j][c0 + i]: one 8-pixel × NB-channel register block over a
// row segment's contributing Gaussians; each feature value fetched is one broadcast for 8 pixels.
template <typename T, int NB>
__attribute__((always_inline)) inline void segment_block(typename Lanes<T>::V* acc,
                                                         const typename Lanes<T>::V* w,
                                                         const T* const* rows, int n, int64_t c0) {
  typename Lanes<T>::V r[NB];
#pragma GCC unroll 16
  for (int i = 0; i < NB; ++i) r[i] = typename Lanes<T>::V{};
  for (int j = 0; j < n; ++j) {
    const typename Lanes<T>::V wj = w[j];
    const T* f = rows[j] + c0;
#pragma GCC unroll 16
    for (int i = 0; i < NB; ++i) r[i] += f[i] * wj;
  }
#pragma GCC unroll 16
  for (int i = 0; i < NB; ++i) acc[c0 + i] = r[i];
}

// The channel tail (CH mod kChanRegs) as one block of its exact width: any CH, no padding.
template <typename T, int NB>
__attribute__((always_inline)) inline void segment_tail(typename Lanes<T>::V* acc,
                                                        const typename Lanes<T>::V* w,
                                                        const T* const* rows, int n, int64_t c0,
                                                        int width) {
  if constexpr (NB > 0) {
    if (width == NB)
      segment_block<T, NB>(acc, w, rows, n, c0);
    else
      segment_tail<T, NB - 1>(acc, w, rows, n, c0, width);
  }
}

// The backward's dL/dw per pair: out[r] = Σ_c rows[r][c] · GT[c] (GT: a segment's upstream
// gradient channel-major, one 8-pixel vector per channel) for R pairs at once, so each GT[c]
// loaded serves R independent accumulators (one chain per pair would wait on the FMA latency).
template <typename T, int R>
__attribute__((always_inline)) inline void pair_dots_block(typename Lanes<T>::V* out,
                                                           const T* const* rows,
                                                           const typename Lanes<T>::V* GT,
                                                           int64_t CH) {
  typename Lanes<T>::V r[R];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) r[i] = typename Lanes<T>::V{};
  for (int64_t c = 0; c < CH; ++c) {
    const typename Lanes<T>::V g = GT[c];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) r[i] += rows[i][c] * g;
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) out[i] = r[i];
}

// out[k] = Σ_c rows[k][c] · GT[c] for the n pairs of a segment: blocks of kDotRows pairs (8
// float / 4 double accumulators: each double vector is two AVX2 registers), the tail as one
// block of its exact size. Each pair's sum runs over c in order, as a plain loop would.
template <typename T>
constexpr int kDotRows = sizeof(T) == 4 ? 8 : 4;
template <typename T, int R>
__attribute__((always_inline)) inline void pair_dots_tail(typename Lanes<T>::V* out,
                                                          const T* const* rows,
                                                          const typename Lanes<T>::V* GT,
                                                          int64_t CH, int n) {
  if constexpr (R > 0) {
    if (n == R)
      pair_dots_block<T, R>(out, rows, GT, CH);
    else
      pair_dots_tail<T, R - 1>(out, rows, GT, CH, n);
  }
}
template <typename T>
__attribute__((always_inline)) inline void pair_dots(typename Lanes<T>::V* out, const T* const* rows,
                                                     const typename Lanes<T>::V* GT, int64_t CH,
                                                     int n) {
  int k = 0;
  for (; k + kDotRows<T> <= n; k += kDotRows<T>)
    pair_dots_block<T, kDotRows<T>>(out + k, rows + k, GT, CH);
  pair_dots_tail<T, kDotRows<T> - 1>(out + k, rows + k, GT, CH, n - k);
}

// Lock-free atomic add for gradients that several tiles reduce into.
template <typename T>
inline void atomic_add(T* addr, T value) {
  T expected, desired;
  __atomic_load(addr, &expected, __ATOMIC_RELAXED);
  do {
    desired = expected + value;
  } while (!__atomic_compare_exchange(addr, &expected, &desired, true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED));
}

}  // namespace cpu
}  // namespace gsrender
