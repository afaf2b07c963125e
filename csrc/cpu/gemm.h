// The CPU rasterizer's accumulation OUT = Wᵀ·F per 8-pixel row segment (docs/design.md §4), register-
// blocked so the accumulators stay in vector registers: channel-major for whole 8-channel vectors
// (channel_vectors: the feature channels, in 16-channel vectors on AVX-512), pixel-major for the
// last CH mod 8 (segment_tail: RGB + depth). Feature rows are given by pointer, so only the contributing Gaussians' rows are ever
// read (lazy fetch).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "lanes.h"

namespace gsrender {
namespace cpu {

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

// The channel tail (CH mod 8) as one block of its exact width: any CH, no padding.
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

// f.template operator()<R>(k) over n items in blocks of R (k: the block's first item), the last
// block of its exact size (R a constant in each instantiation: register-blocked loops).
template <int R, class F>
__attribute__((always_inline)) inline void last_block(int k, int rest, const F& f) {
  if constexpr (R > 0) {
    if (rest == R)
      f.template operator()<R>(k);
    else
      last_block<R - 1>(k, rest, f);
  }
}
template <int R, class F>
__attribute__((always_inline)) inline void in_blocks(int n, const F& f) {
  int k = 0;
  for (; k + R <= n; k += R) f.template operator()<R>(k);
  last_block<R - 1>(k, n - k, f);
}

// The backward's dL/dw per pair: out[k] = Σ_c rows[k][c] · G[·][c] over a segment's 8 pixels,
// for R pairs at once, so that each gradient vector loaded serves R independent accumulators
// (one chain per pair would wait on the FMA latency). Two layouts of the segment's gradient G:
// - channel-major (pair_dots): GT[c] one 8-pixel vector per channel, each feature value one
//   broadcast; each sum runs over c in order. kDotRows: 8 float / 4 double accumulators (a double
//   vector is two AVX2 registers).
// - in channel pairs (pair_dots_paired, AVX-512): G2[j] one 16-lane vector, lane 2l + k pixel l's
//   channel 2j + k, so one broadcast of a feature row's pair (a 64-bit load for float) serves
//   8 pixels × 2 channels: one zmm FMA does the work of two ymm ones. Lanes 2l and 2l + 1 sum
//   pixel l's even and odd channels, added at the end. Used from 16 channels (1 thread, 100k at
//   512², per training step: D = 64 −3 to −5 %; D = 0 with it, 268 / 270 ms against 260 / 261,
//   so RGB + depth keep the channel-major layout, as do the copies without 16-float registers).
template <typename T>
constexpr int kDotRows = sizeof(T) == 4 ? 8 : 4;
template <typename T>
__attribute__((always_inline)) inline void pair_dots(typename Lanes<T>::V* out, const T* const* rows,
                                                     const typename Lanes<T>::V* GT, int64_t CH,
                                                     int n) {
  using V = typename Lanes<T>::V;
  in_blocks<kDotRows<T>>(n, [&]<int R>(int k) {
    V r[R];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) r[i] = V{};
    for (int64_t c = 0; c < CH; ++c) {
      const V g = GT[c];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) r[i] += rows[k + i][c] * g;
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) out[k + i] = r[i];
  });
}

template <typename T>
struct PairLanes {
  // lane 2l + k: pixel l, channel 2j + k
  typedef T V __attribute__((vector_size(2 * kLanes * sizeof(T))));
  // Channel pairs of CH channels: an odd CH's last one pairs with a zero channel.
  static int64_t pairs(int64_t CH) { return (CH + 1) / 2; }
};

// The channel pair (f[0], f[1]) in every pixel's two lanes: for float one 64-bit broadcast load
// (written as a float shuffle, or built from two floats, GCC goes through the stack or a
// general register).
template <typename T>
__attribute__((always_inline)) inline typename PairLanes<T>::V splat_pair(const T* f) {
  using W = typename PairLanes<T>::V;
  if constexpr (sizeof(T) == 4) {
    typedef uint64_t U __attribute__((vector_size(sizeof(W))));
    uint64_t pair;  // lane 2l: the low half, f[0]
    std::memcpy(&pair, f, sizeof(pair));
    return reinterpret_cast<W>(U{} + pair);
  } else {
    return W{f[0], f[1], f[0], f[1], f[0], f[1], f[0], f[1],
             f[0], f[1], f[0], f[1], f[0], f[1], f[0], f[1]};
  }
}

// 16 accumulators of 16 floats: half of AVX-512's 32 registers (the double copy, two each).
template <typename T>
constexpr int kPairedDotRows = sizeof(T) == 4 ? 16 : 8;
template <typename T>
__attribute__((always_inline)) inline void pair_dots_paired(typename Lanes<T>::V* out,
                                                            const T* const* rows,
                                                            const typename PairLanes<T>::V* G2,
                                                            int64_t CH, int n) {
  using W = typename PairLanes<T>::V;
  in_blocks<kPairedDotRows<T>>(n, [&]<int R>(int k) {
    W r[R];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) r[i] = W{};
    const int64_t whole = CH / 2;
    for (int64_t j = 0; j < whole; ++j) {
      const W g = G2[j];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) r[i] += g * splat_pair<T>(rows[k + i] + 2 * j);
    }
    if (CH % 2) {  // the last channel with a zero (read alone: the row ends there)
      const W g = G2[whole];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const T last[2] = {rows[k + i][CH - 1], T(0)};
        r[i] += g * splat_pair<T>(last);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
      out[k + i] = __builtin_shufflevector(r[i], r[i], 0, 2, 4, 6, 8, 10, 12, 14) +
                   __builtin_shufflevector(r[i], r[i], 1, 3, 5, 7, 9, 11, 13, 15);
  });
}

// The feature channels' vectors: CW channels of one pixel, CW = kLanes (8: a ymm of floats, 8
// doubles) or kWideChannels (16 floats: a zmm, for the AVX-512 copy only; cpu::wide_vectors).
template <typename T, int CW>
struct ChanVec {
  typedef T V __attribute__((vector_size(CW * sizeof(T))));
};
template <typename T>
constexpr int kWideChannels = sizeof(T) == 4 ? 16 : kLanes;  // double: no wider than Lanes

// The backward's feature gradient per segment: d[k][0, chp) += Σ_l w[k][l] · G[l][·] for n pairs
// (w[k]: pair k's weights on the 8 pixels, G: the pixels' upstream gradients pixel-major, rows of
// chp = CH rounded up to whole CW-channel vectors, zero-padded; d[k]: pair k's gradient row, chp
// wide). A register block of R pairs × NB channel vectors: per pixel, NB gradient vectors loaded
// and R weights broadcast serve R·NB FMAs. Each element adds its 8 pixels in order, as the plain
// per-pair loop would, whatever CW is (the AVX-512 copy's 16-channel vectors give the AVX2
// copy's bits).
template <typename T, int CW>
constexpr int kOuterVecRegs = CW > kLanes ? 32 : (sizeof(T) == 4 ? 16 : 8);  // a double ymm pair: 8
// Channel vectors per block: AVX2's 2 pairs share 6 (2·6 accumulators, 2 weights, a gradient
// vector); AVX-512's 32 registers hold 4 pairs × 6.
template <typename T, int CW>
constexpr int kOuterNB = CW > kLanes ? 6 : (kOuterVecRegs<T, CW> - 3) / 2;
// Pairs per block of NB vectors: R·NB accumulators, R weights and a gradient vector (at most 8).
template <typename T, int CW, int NB>
constexpr int kOuterRows = std::clamp((kOuterVecRegs<T, CW> - 1) / (NB + 1), 1, 8);
template <typename T, int CW, int R, int NB>
__attribute__((always_inline)) inline void pair_outer_block(T* const* d, const T* w, const T* G,
                                                            int64_t chp, int64_t c0) {
  using V = typename ChanVec<T, CW>::V;
  V acc[R][NB];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < NB; ++j) std::memcpy(&acc[r][j], d[r] + c0 + j * CW, sizeof(V));
  // The pixel loop stays a loop: unrolled, GCC schedules each accumulator's 8 dependent adds
  // back to back (one chain at a time, spilling the 8·R hoisted weights), not R·NB independent
  // chains per pixel.
#pragma GCC unroll 1
  for (int l = 0; l < kLanes; ++l) {
    T wl[R];  // (scalar × vector: the broadcast GCC emits for it is one load)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wl[r] = w[r * kLanes + l];
#pragma GCC unroll 16
    for (int j = 0; j < NB; ++j) {
      V g;
      std::memcpy(&g, G + l * chp + c0 + j * CW, sizeof(V));
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][j] += wl[r] * g;
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < NB; ++j) std::memcpy(d[r] + c0 + j * CW, &acc[r][j], sizeof(V));
}

// The n pairs on one NB-vector channel block, kOuterRows at a time, the last block of its exact
// size.
template <typename T, int CW, int NB>
__attribute__((always_inline)) inline void pair_outer_blocks(T* const* d, const T* w, const T* G,
                                                             int64_t chp, int64_t c0, int n) {
  in_blocks<kOuterRows<T, CW, NB>>(n, [&]<int R>(int k) {
    pair_outer_block<T, CW, R, NB>(d + k, w + k * kLanes, G, chp, c0);
  });
}
// The channel tail (the last nb < kOuterNB vectors) as one block of its exact width.
template <typename T, int CW, int NB>
__attribute__((always_inline)) inline void pair_outer_width(T* const* d, const T* w, const T* G,
                                                            int64_t chp, int64_t c0, int n, int nb) {
  if constexpr (NB > 0) {
    if (nb == NB)
      pair_outer_blocks<T, CW, NB>(d, w, G, chp, c0, n);
    else
      pair_outer_width<T, CW, NB - 1>(d, w, G, chp, c0, n, nb);
  }
}
// chp: a multiple of CW.
template <typename T, int CW>
__attribute__((always_inline)) inline void pair_outer(T* const* d, const T* w, const T* G,
                                                      int64_t chp, int n) {
  constexpr int NB = kOuterNB<T, CW>;
  int64_t c0 = 0;
  for (; c0 + NB * CW <= chp; c0 += NB * CW) pair_outer_blocks<T, CW, NB>(d, w, G, chp, c0, n);
  pair_outer_width<T, CW, NB - 1>(d, w, G, chp, c0, n, int((chp - c0) / CW));
}

// Wide outputs (the feature channels) channel-major: OUT[p][c0 .. c0 + CW·NV) for the P pixels
// p0 .. p0 + P of a segment, P × NV vectors of CW channels in registers. Each feature vector
// fetched feeds P FMAs, one per pixel (its weight broadcast), where the pixel-major block above
// feeds one FMA per feature value broadcast; the result is each pixel's channels contiguous, as
// the image stores them. Runs over the n Gaussians idx[0 .. n) that light some of these P
// pixels, in order (each channel's sum adds them in the same order whatever CW is);
// store(p, c, v) receives pixel p's channels c .. c + CW.
template <typename T, int CW, int P, int NV, typename Store>
__attribute__((always_inline)) inline void channel_block(const typename Lanes<T>::V* w,
                                                         const T* const* rows,
                                                         const int32_t* idx, int n, int p0,
                                                         int64_t c0, const Store& store) {
  using V = typename ChanVec<T, CW>::V;
  V r[P][NV];
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) r[p][v] = V{};
  for (int i = 0; i < n; ++i) {
    const int32_t j = idx[i];
    const T* f = rows[j] + c0;
    V fv[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) std::memcpy(&fv[v], f + v * CW, sizeof(V));
    const T* wj = reinterpret_cast<const T*>(w + j) + p0;
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) {
      const T b = wj[p];  // (vector × scalar: one broadcast load, AVX-512: the FMA's operand)
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) r[p][v] += fv[v] * b;
    }
  }
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) store(p0 + p, c0 + v * CW, r[p][v]);
}

constexpr int kPixelBlock = 4;  // pixels per channel-major block: a segment's half
// Channel vectors per channel-major block, so that its kPixelBlock × NV accumulators and NV
// feature vectors fit the registers: AVX2's 16 ymm hold 4 × 3 + 3 and the broadcast weight;
// AVX-512's 32 zmm 4 × 6 + 6 (the weight is the FMA's broadcast memory operand).
template <int CW>
constexpr int kChanVecs = CW > kLanes ? 6 : 3;

// A segment's contributing Gaussians (w[0 .. n)) per 4-pixel half: the ones whose weight is not
// zero on some pixel of the half, so a Gaussian that lights one half only is not run through the
// other's FMAs (exact: a zero weight adds nothing). idx[h] needs room for n entries.
template <typename T>
__attribute__((always_inline)) inline void split_halves(const typename Lanes<T>::V* w, int n,
                                                        int32_t* const idx[2], int count[2]) {
  count[0] = count[1] = 0;
  for (int j = 0; j < n; ++j) {
    bool lo, hi;
    any_lane_halves(w[j] != T(0), lo, hi);
    idx[0][count[0]] = j, idx[1][count[1]] = j;  // kept only where the half is lit
    count[0] += lo, count[1] += hi;
  }
}

// Channels [c0, c0 + CW·nvec) of a segment's first `pixels` pixels channel-major, in blocks of
// NV vectors of CW channels (the last block narrower), each block over both pixel halves
// (split_halves's lists) while its slice of the feature rows is in L1.
template <typename T, int CW, int NV, typename Store>
__attribute__((always_inline)) inline void channel_major(const typename Lanes<T>::V* w,
                                                         const T* const* rows,
                                                         int32_t* const idx[2], const int count[2],
                                                         int pixels, int64_t c0, int64_t nvec,
                                                         const Store& store) {
  for (; nvec >= NV; nvec -= NV, c0 += NV * CW)
    for (int h = 0; h * kPixelBlock < pixels; ++h)
      channel_block<T, CW, kPixelBlock, NV>(w, rows, idx[h], count[h], h * kPixelBlock, c0, store);
  if constexpr (NV > 1)
    if (nvec > 0) channel_major<T, CW, NV - 1>(w, rows, idx, count, pixels, c0, nvec, store);
}

// Channels [0, nc) of the output (nc: its whole 8-channel vectors, CH − CH mod 8) channel-major
// in vectors of CW channels; with CW = 16, an odd 8-channel vector left over runs as one of 8.
// store(p, c, v) receives pixel p's channels c .. c + CW, or c .. c + 8 for that last one.
template <typename T, int CW, typename Store>
__attribute__((always_inline)) inline void channel_vectors(const typename Lanes<T>::V* w,
                                                           const T* const* rows,
                                                           int32_t* const idx[2],
                                                           const int count[2], int pixels,
                                                           int64_t nc, const Store& store) {
  const int64_t nvec = nc / CW;
  channel_major<T, CW, kChanVecs<CW>>(w, rows, idx, count, pixels, 0, nvec, store);
  if constexpr (CW > kLanes)
    if (nc > nvec * CW) channel_major<T, kLanes, 1>(w, rows, idx, count, pixels, nvec * CW, 1, store);
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
