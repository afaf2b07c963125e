// Small dense kernels for the CPU rasterizer's accumulation (DESIGN §4), register-blocked so the
// compiler keeps a 4-pixel × 16-channel accumulator in vector registers. Feature rows are given
// by pointer, so only the packed Gaussians' rows are ever read (lazy fetch).
#pragma once
#include <cstdint>

#include "simd.h"

namespace gsrender {
namespace cpu {

constexpr int kRowBlock = 4;    // pixels per register block
constexpr int kChanBlock = 16;  // channels per register block

// out[p, :] += Σ_k w[p*ldw + k] · rows[k][:]   for p < P (P a multiple of kRowBlock), k < K.
template <typename T>
GSR_CPU_CLONES void accumulate_rows(T* __restrict out, int64_t ldo, const T* __restrict w, int ldw,
                            const T* const* rows, int P, int K, int CH) {
  for (int p0 = 0; p0 < P; p0 += kRowBlock) {
    const T* w0 = w + (p0 + 0) * ldw;
    const T* w1 = w + (p0 + 1) * ldw;
    const T* w2 = w + (p0 + 2) * ldw;
    const T* w3 = w + (p0 + 3) * ldw;
    int c0 = 0;
    for (; c0 + kChanBlock <= CH; c0 += kChanBlock) {
      T acc[kRowBlock][kChanBlock] = {};
      for (int k = 0; k < K; ++k) {
        const T* f = rows[k] + c0;
        const T a0 = w0[k], a1 = w1[k], a2 = w2[k], a3 = w3[k];
#pragma omp simd
        for (int j = 0; j < kChanBlock; ++j) {
          acc[0][j] += a0 * f[j];
          acc[1][j] += a1 * f[j];
          acc[2][j] += a2 * f[j];
          acc[3][j] += a3 * f[j];
        }
      }
      for (int r = 0; r < kRowBlock; ++r)
        for (int j = 0; j < kChanBlock; ++j) out[(p0 + r) * ldo + c0 + j] += acc[r][j];
    }
    if (c0 < CH) {  // masked channel tail: any CH works, no padding to a compiled set
      const int n = CH - c0;
      T acc[kRowBlock][kChanBlock] = {};
      for (int k = 0; k < K; ++k) {
        const T* f = rows[k] + c0;
        const T a[kRowBlock] = {w0[k], w1[k], w2[k], w3[k]};
        for (int r = 0; r < kRowBlock; ++r)
          for (int j = 0; j < n; ++j) acc[r][j] += a[r] * f[j];
      }
      for (int r = 0; r < kRowBlock; ++r)
        for (int j = 0; j < n; ++j) out[(p0 + r) * ldo + c0 + j] += acc[r][j];
    }
  }
}

// dw[p*ldw + k] = Σ_c g[p, c] · rows[k][c]   (G · Fᵀ, the backward's dW)
template <typename T>
GSR_CPU_CLONES void dot_rows(T* __restrict dw, int ldw, const T* __restrict g, int64_t ldg,
                     const T* const* rows, int P, int K, int CH) {
  for (int k = 0; k < K; ++k) {
    const T* f = rows[k];
    for (int p = 0; p < P; ++p) {
      const T* gp = g + p * ldg;
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int c = 0; c < CH; ++c) s += gp[c] * f[c];
      dw[p * ldw + k] = s;
    }
  }
}

// drows[k][:] += Σ_p w[p*ldw + k] · g[p, :]   (Wᵀ · G, the backward's dF, scattered to the
// packed Gaussians' gradient rows).
template <typename T>
GSR_CPU_CLONES void accumulate_transposed(T* const* drows, const T* __restrict w, int ldw,
                                  const T* __restrict g, int64_t ldg, int P, int K, int CH) {
  for (int k = 0; k < K; ++k) {
    T* __restrict d = drows[k];
    for (int p = 0; p < P; ++p) {
      const T wk = w[p * ldw + k];
      if (wk == T(0)) continue;
      const T* gp = g + p * ldg;
#pragma omp simd
      for (int c = 0; c < CH; ++c) d[c] += wk * gp[c];
    }
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
