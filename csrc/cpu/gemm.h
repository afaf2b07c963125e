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
