// Host-side warp emulator, used only by tests (docs/design.md §5.4): 32 lanes in lockstep as 32-wide
// vectors, CUDA's shuffle semantics, and mma.m16n8k16 / ldmatrix.x2.trans emulated from the
// documented fragment layouts (gsrender/mma_fragments.h; ldmatrix.x4 and the full-warp xor for the
// backward). The lane-generic functions of those headers run here unchanged with V = Lanes<float>,
// I = Lanes<int>, M = Lanes<bool>.
#pragma once
#include <cstdint>

#include "gsrender/mma_fragments.h"

namespace gsrender {
namespace emu {

constexpr int kLanes = mma::kWarpSize;

// One value per lane; arithmetic and comparisons act lane by lane, scalars broadcast.
template <typename T>
struct Lanes {
  T v[kLanes];

  Lanes() = default;
  Lanes(T s) {  // NOLINT: implicit broadcast, as a scalar in SIMT code
    for (int l = 0; l < kLanes; ++l) v[l] = s;
  }
  T& operator[](int l) { return v[l]; }
  const T& operator[](int l) const { return v[l]; }

#define GSR_LANES_BINOP(op, R)                                   \
  friend Lanes<R> operator op(const Lanes& a, const Lanes& b) {  \
    Lanes<R> r;                                                  \
    for (int l = 0; l < kLanes; ++l) r.v[l] = a.v[l] op b.v[l]; \
    return r;                                                    \
  }
  GSR_LANES_BINOP(+, T)
  GSR_LANES_BINOP(-, T)
  GSR_LANES_BINOP(*, T)
  GSR_LANES_BINOP(&, T)
  GSR_LANES_BINOP(|, T)
  GSR_LANES_BINOP(<, bool)
  GSR_LANES_BINOP(>, bool)
  GSR_LANES_BINOP(<=, bool)
  GSR_LANES_BINOP(>=, bool)
#undef GSR_LANES_BINOP
  friend Lanes operator!(const Lanes& a) {
    Lanes r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = !a.v[l];
    return r;
  }
};

template <typename T>
Lanes<T> sel(const Lanes<bool>& c, const Lanes<T>& a, const Lanes<T>& b) {
  Lanes<T> r;
  for (int l = 0; l < kLanes; ++l) r.v[l] = c.v[l] ? a.v[l] : b.v[l];
  return r;
}
template <typename T>
Lanes<T> vmin(const Lanes<T>& a, const Lanes<T>& b) {
  Lanes<T> r;
  for (int l = 0; l < kLanes; ++l) r.v[l] = b.v[l] < a.v[l] ? b.v[l] : a.v[l];
  return r;
}
template <typename T>
Lanes<T> vmax(const Lanes<T>& a, const Lanes<T>& b) {
  Lanes<T> r;
  for (int l = 0; l < kLanes; ++l) r.v[l] = b.v[l] > a.v[l] ? b.v[l] : a.v[l];
  return r;
}

inline Lanes<int> lane_ids() {
  Lanes<int> r;
  for (int l = 0; l < kLanes; ++l) r.v[l] = l;
  return r;
}

// CUDA __shfl_*_sync semantics, all 32 lanes active, `width` a power of two ≤ 32.
// up: lane l reads l − d unless that crosses its width-segment's start (then keeps its own).
template <typename T>
Lanes<T> shfl_up(const Lanes<T>& x, int d, int width = kLanes) {
  Lanes<T> r;
  for (int l = 0; l < kLanes; ++l) r.v[l] = (l % width) >= d ? x.v[l - d] : x.v[l];
  return r;
}
// down: lane l reads l + d unless that crosses its segment's end.
template <typename T>
Lanes<T> shfl_down(const Lanes<T>& x, int d, int width = kLanes) {
  Lanes<T> r;
  for (int l = 0; l < kLanes; ++l) r.v[l] = (l % width) + d < width ? x.v[l + d] : x.v[l];
  return r;
}
// xor: lane l reads l ^ m; a source in a later segment is not visible (own value).
template <typename T>
Lanes<T> shfl_xor(const Lanes<T>& x, int m, int width = kLanes) {
  Lanes<T> r;
  for (int l = 0; l < kLanes; ++l) {
    const int src = l ^ m;
    r.v[l] = src < (l / width + 1) * width ? x.v[src & (kLanes - 1)] : x.v[l];
  }
  return r;
}
// idx: lane l reads lane src (mod width) of its own segment.
template <typename T>
Lanes<T> shfl_idx(const Lanes<T>& x, int src, int width = kLanes) {
  Lanes<T> r;
  for (int l = 0; l < kLanes; ++l) r.v[l] = x.v[(l / width) * width + (src % width)];
  return r;
}

// The quad shuffles mma_fragments.h is written against (width 4), counting the shuffles issued.
struct EmuQuad {
  int64_t shuffles = 0;
  template <typename T>
  Lanes<T> up(const Lanes<T>& x, int d) { return ++shuffles, shfl_up(x, d, 4); }
  template <typename T>
  Lanes<T> idx(const Lanes<T>& x, int src) { return ++shuffles, shfl_idx(x, src, 4); }
  template <typename T>
  Lanes<T> xor_(const Lanes<T>& x, int m) { return ++shuffles, shfl_xor(x, m, 4); }
};

// Operand registers of one warp, per lane: A 8 elements, B 4, C/D 4 (PTX element order).
// Elements are held as floats already decoded from f16 / bf16 / f32 registers (the "f32 operand"
// mode skips the rounding, proving the bookkeeping alone).
struct FragA {
  float e[kLanes][8];
};
struct FragB {
  float e[kLanes][4];
};
struct FragC {
  float e[kLanes][4];
};

// Decodes packed .f16x2 / .bf16x2 registers (reg[lane][r], element 2r + half).
template <int R, typename Frag>
void unpack_regs(const uint32_t (&reg)[kLanes][R], bool bf16, Frag& out) {
  for (int l = 0; l < kLanes; ++l)
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) {
        const uint16_t bits = static_cast<uint16_t>(reg[l][r] >> (16 * h));
        out.e[l][2 * r + h] = bf16 ? mma::bf16_bits_to_float(bits) : mma::half_bits_to_float(bits);
      }
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32: every lane's elements are
// scattered into A (16×16), B (16×8), C (16×8) through the documented maps, D = A·B + C in f32
// (products of halves are exact in f32), and D gathered back into each lane's C layout.
inline void mma_m16n8k16(const FragA& a, const FragB& b, const FragC& c, FragC& d) {
  float A[mma::kM][mma::kK], B[mma::kK][mma::kN], C[mma::kM][mma::kN];
  for (int l = 0; l < kLanes; ++l) {
    for (int i = 0; i < 8; ++i) A[mma::a_row(l, i)][mma::a_col(l, i)] = a.e[l][i];
    for (int i = 0; i < 4; ++i) B[mma::b_row(l, i)][mma::b_col(l, i)] = b.e[l][i];
    for (int i = 0; i < 4; ++i) C[mma::c_row(l, i)][mma::c_col(l, i)] = c.e[l][i];
  }
  for (int l = 0; l < kLanes; ++l)
    for (int i = 0; i < 4; ++i) {
      const int r = mma::c_row(l, i), n = mma::c_col(l, i);
      float acc = C[r][n];
      for (int k = 0; k < mma::kK; ++k) acc += A[r][k] * B[k][n];
      d.e[l][i] = acc;
    }
}

// ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16: lane l < 16 supplies rows[l] (8 b16 values),
// row l&7 of matrix l>>3; with .trans lane receives out[lane][m] = {M_m[2t][g], M_m[2t+1][g]}.
inline void ldmatrix_x2_trans(const uint16_t* const (&rows)[kLanes], uint32_t (&out)[kLanes][2]) {
  for (int l = 0; l < kLanes; ++l) {
    const int g = l >> 2, t = l & 3;
    for (int m = 0; m < 2; ++m) {
      const uint16_t lo = rows[8 * m + 2 * t][g], hi = rows[8 * m + 2 * t + 1][g];
      out[l][m] = uint32_t(lo) | (uint32_t(hi) << 16);
    }
  }
}

// The full-warp xor shuffle gsrender/mma_bwd_fragments.h's column_sum is written against.
struct EmuWarp {
  int64_t shuffles = 0;
  template <typename T>
  Lanes<T> xor_(const Lanes<T>& x, int m) { return ++shuffles, shfl_xor(x, m); }
};

// ldmatrix.sync.aligned.m8n8.{x2,x4}{,.trans}.shared.b16 on values already decoded to float (the
// staged f16 / bf16 operands, or f32 ones): lane l supplies rows[l], row l&7 of matrix M_m,
// m = l>>3 (lanes ≥ 8R ignored); register m of a lane holds elements 2m (low) and 2m+1 (high):
// plain {M_m[g][2t], M_m[g][2t+1]}, .trans {M_m[2t][g], M_m[2t+1][g]}.
template <int R>
void ldmatrix(const float* const (&rows)[kLanes], bool trans, float (&out)[kLanes][2 * R]) {
  for (int l = 0; l < kLanes; ++l) {
    const int g = l >> 2, t = l & 3;
    for (int m = 0; m < R; ++m)
      for (int h = 0; h < 2; ++h)
        out[l][2 * m + h] = trans ? rows[8 * m + 2 * t + h][g] : rows[8 * m + g][2 * t + h];
  }
}

}  // namespace emu
}  // namespace gsrender
