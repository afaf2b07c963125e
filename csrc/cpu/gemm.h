// Small dense kernels for the CPU rasterizer's accumulation (DESIGN §4), register-blocked so the
// compiler keeps a 4-pixel × 16-channel accumulator in vector registers. Feature rows are given
// by pointer, so only the packed Gaussians' rows are ever read (lazy fetch).
#pragma once
#include <cstdint>
#include <cstring>

#include "simd.h"

namespace gsrender {
namespace cpu {

constexpr int kRowBlock = 4;    // pixels per register block
constexpr int kChanBlock = 16;  // channels per register block

// One register block: acc[r][c] = Σ_j w_r[ks[j]] · rows[ks[j]][c0 + c] for 4 pixels × CB channels.
template <typename T, int CB>
inline void row_block(T (&acc)[kRowBlock][CB], const T* w0, const T* w1, const T* w2, const T* w3,
                      const T* const* rows, int64_t c0, const int* ks, int nk) {
  for (int r = 0; r < kRowBlock; ++r)
    for (int c = 0; c < CB; ++c) acc[r][c] = T(0);
  for (int j = 0; j < nk; ++j) {
    const int k = ks[j];
    const T* f = rows[k] + c0;
    const T a0 = w0[k], a1 = w1[k], a2 = w2[k], a3 = w3[k];
#pragma omp simd
    for (int c = 0; c < CB; ++c) {
      acc[0][c] += a0 * f[c];
      acc[1][c] += a1 * f[c];
      acc[2][c] += a2 * f[c];
      acc[3][c] += a3 * f[c];
    }
  }
}

// float: the same block on explicit 8-lane vectors, so every clone gets vector FMAs whatever the
// auto-vectoriser decides.
template <>
inline void row_block<float, kChanBlock>(float (&acc)[kRowBlock][kChanBlock], const float* w0,
                                         const float* w1, const float* w2, const float* w3,
                                         const float* const* rows, int64_t c0, const int* ks,
                                         int nk) {
  f8 a00 = splat(0.f), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  for (int j = 0; j < nk; ++j) {
    const int k = ks[j];
    f8 f0, f1;
    __builtin_memcpy(&f0, rows[k] + c0, sizeof(f8));
    __builtin_memcpy(&f1, rows[k] + c0 + kLanes, sizeof(f8));
    const f8 b0 = splat(w0[k]), b1 = splat(w1[k]), b2 = splat(w2[k]), b3 = splat(w3[k]);
    a00 += b0 * f0, a01 += b0 * f1, a10 += b1 * f0, a11 += b1 * f1;
    a20 += b2 * f0, a21 += b2 * f1, a30 += b3 * f0, a31 += b3 * f1;
  }
  const f8 res[kRowBlock][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}};
  __builtin_memcpy(acc, res, sizeof(acc));
}

// float, 8-channel block: RGB+depth and short channel tails (one vector per pixel row).
template <>
inline void row_block<float, kChanBlock / 2>(float (&acc)[kRowBlock][kChanBlock / 2],
                                             const float* w0, const float* w1, const float* w2,
                                             const float* w3, const float* const* rows,
                                             int64_t c0, const int* ks, int nk) {
  f8 a0 = splat(0.f), a1 = a0, a2 = a0, a3 = a0;
  for (int j = 0; j < nk; ++j) {
    const int k = ks[j];
    f8 f;
    __builtin_memcpy(&f, rows[k] + c0, sizeof(f8));
    a0 += splat(w0[k]) * f, a1 += splat(w1[k]) * f, a2 += splat(w2[k]) * f, a3 += splat(w3[k]) * f;
  }
  const f8 res[kRowBlock] = {a0, a1, a2, a3};
  __builtin_memcpy(acc, res, sizeof(acc));
}

// out[p, :] += Σ_k w[p*ldw + k] · rows[k][:]   for p < P (P a multiple of kRowBlock), k < K.
// Columns where a whole row block's weights are 0 (saturated or missed pixels) are skipped. The
// channel tail (any CH works, no padding to a compiled set) is staged into a zero-padded copy
// so it runs through the same vector block instead of a scalar loop.
template <typename T>
void accumulate_rows(T* __restrict out, int64_t ldo, const T* __restrict w, int ldw,
                                    const T* const* rows, int P, int K, int CH) {
  const int64_t body = CH - CH % kChanBlock;
  const int tail = static_cast<int>(CH - body);
  T tail_rows[64][kChanBlock];  // K <= kBatch (32)
  const T* tail_ptr[64];
  if (tail > 0)
    for (int k = 0; k < K; ++k) {
      std::memcpy(tail_rows[k], rows[k] + body, tail * sizeof(T));
      std::memset(tail_rows[k] + tail, 0, (kChanBlock - tail) * sizeof(T));
      tail_ptr[k] = tail_rows[k];
    }
  for (int p0 = 0; p0 < P; p0 += kRowBlock) {
    const T* w0 = w + (p0 + 0) * ldw;
    const T* w1 = w + (p0 + 1) * ldw;
    const T* w2 = w + (p0 + 2) * ldw;
    const T* w3 = w + (p0 + 3) * ldw;
    int ks[64];
    int nk = 0;
    for (int k = 0; k < K; ++k)
      if (w0[k] != T(0) || w1[k] != T(0) || w2[k] != T(0) || w3[k] != T(0)) ks[nk++] = k;
    if (nk == 0) continue;
    for (int64_t c0 = 0; c0 < body; c0 += kChanBlock) {
      T acc[kRowBlock][kChanBlock];
      row_block<T, kChanBlock>(acc, w0, w1, w2, w3, rows, c0, ks, nk);
      for (int r = 0; r < kRowBlock; ++r)
#pragma omp simd
        for (int c = 0; c < kChanBlock; ++c) out[(p0 + r) * ldo + c0 + c] += acc[r][c];
    }
    if (tail > kChanBlock / 2) {
      T acc[kRowBlock][kChanBlock];
      row_block<T, kChanBlock>(acc, w0, w1, w2, w3, tail_ptr, 0, ks, nk);
      for (int r = 0; r < kRowBlock; ++r)
        for (int c = 0; c < tail; ++c) out[(p0 + r) * ldo + body + c] += acc[r][c];
    } else if (tail > 0) {  // half-width block: RGB+depth (CH = 4) wastes half the lanes, not 3/4
      T acc[kRowBlock][kChanBlock / 2];
      row_block<T, kChanBlock / 2>(acc, w0, w1, w2, w3, tail_ptr, 0, ks, nk);
      for (int r = 0; r < kRowBlock; ++r)
        for (int c = 0; c < tail; ++c) out[(p0 + r) * ldo + body + c] += acc[r][c];
    }
  }
}

// dw[p*ldw + k] = Σ_c g[p, c] · rows[k][c]   (G · Fᵀ, the backward's dW)
template <typename T>
void dot_rows(T* __restrict dw, int ldw, const T* __restrict g, int64_t ldg,
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
void accumulate_transposed(T* const* drows, const T* __restrict w, int ldw,
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
