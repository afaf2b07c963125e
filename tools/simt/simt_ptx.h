// Host emulation of the warp-collective PTX instructions csrc/cuda/ptx.cuh wraps, for the
// SIMT build (simt.h): each lane posts its registers and the warp's instruction runs once every
// lane of the warp has arrived, from the PTX ISA's fragment layouts (g = lane >> 2, t = lane & 3):
//   mma.m16n8k16 (f16 / bf16): A a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..),
//     a3 = (g+8, 2t+8..); B b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g); C/D c0,c1 = (g, 2t..),
//     c2,c3 = (g+8, 2t..); low half = lower column / k.
//   mma.m16n8k8 (tf32): A a0 = (g, t), a1 = (g+8, t), a2 = (g, t+4), a3 = (g+8, t+4);
//     B b0 = (k t, n g), b1 = (k t+4, n g); C/D as above.
//   ldmatrix .m8n8 .x2 / .x4 (.trans): lane 8m + r gives the address of row r of matrix m; lane
//     receives r[m] = {M_m[g][2t], M_m[g][2t+1]} (.trans: {M_m[2t][g], M_m[2t+1][g]}).
// Products of f16 / bf16 / tf32 values are exact in f32; D accumulates them in f32 in k order
// onto C. GSR_SIMT_FAULT=mma_swap_a1_a2 in the environment swaps A registers a1 and a2 of every
// f16 / bf16 MMA: a deliberate fault the case checker must catch (tests/test_simt_driver.py).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "simt.h"

namespace gsr_simt {
namespace ptx {

enum class MmaType { kF16, kBF16, kTF32 };

// The operand type named in an mma instruction string (".bf16", ".tf32", else f16).
constexpr bool has(const char* s, const char* w) {
  for (; *s; ++s) {
    int i = 0;
    while (w[i] && s[i] == w[i]) ++i;
    if (!w[i]) return true;
  }
  return false;
}
constexpr MmaType mma_type(const char* instr) {
  return has(instr, ".bf16") ? MmaType::kBF16 : has(instr, ".tf32") ? MmaType::kTF32 : MmaType::kF16;
}

inline float operand(uint16_t bits, MmaType ty) {
  return ty == MmaType::kF16 ? __half2float(__ushort_as_half(bits))
                             : __bfloat162float(__nv_bfloat16{bits});
}
inline float tf32_value(uint32_t r) {  // the MMA reads the 19 high bits of a tf32 register
  const uint32_t u = r & 0xffffe000u;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bool fault_swap_a12() {
  static const bool on = [] {
    const char* f = std::getenv("GSR_SIMT_FAULT");
    return f && std::strcmp(f, "mma_swap_a1_a2") == 0;
  }();
  return on;
}

struct MmaRec {
  const uint32_t* a;
  const uint32_t* b;
  const float* c;
  float* d;
};

template <MmaType kTy>
void mma_combine(void* const* recs, int, unsigned) {
  constexpr int K = kTy == MmaType::kTF32 ? 8 : 16;
  float A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const MmaRec& r = *static_cast<MmaRec*>(recs[lane]);
    const int g = lane >> 2, t = lane & 3;
    uint32_t a[4] = {r.a[0], r.a[1], r.a[2], r.a[3]};
    if (kTy != MmaType::kTF32 && fault_swap_a12()) std::swap(a[1], a[2]);
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i & 1);
      if constexpr (kTy == MmaType::kTF32) {
        A[row][t + 4 * (i >> 1)] = tf32_value(a[i]);
      } else {
        const int col = 2 * t + 8 * (i >> 1);
        A[row][col] = operand(static_cast<uint16_t>(a[i] & 0xffffu), kTy);
        A[row][col + 1] = operand(static_cast<uint16_t>(a[i] >> 16), kTy);
      }
    }
    for (int i = 0; i < 2; ++i) {
      if constexpr (kTy == MmaType::kTF32) {
        B[t + 4 * i][g] = tf32_value(r.b[i]);
      } else {
        const int k = 2 * t + 8 * i;
        B[k][g] = operand(static_cast<uint16_t>(r.b[i] & 0xffffu), kTy);
        B[k + 1][g] = operand(static_cast<uint16_t>(r.b[i] >> 16), kTy);
      }
    }
    for (int i = 0; i < 4; ++i) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = r.c[i];
  }
  // every lane's C is read before any D is written (d may alias c)
  for (int lane = 0; lane < 32; ++lane) {
    const MmaRec& r = *static_cast<MmaRec*>(recs[lane]);
    const int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
      float acc = C[row][col];
      for (int k = 0; k < K; ++k) acc += A[row][k] * B[k][col];
      r.d[i] = acc;
    }
  }
}

template <MmaType kTy>
inline void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                const float (&c)[4], const char* kind, const char* file, int line) {
  float out[4];
  MmaRec rec{a, b, c, out};
  arrive({Scope::kWarp, kind, 0xffffffffu, file, line, &rec, &mma_combine<kTy>});
  for (int i = 0; i < 4; ++i) d[i] = out[i];
}

struct LdmRec {
  const void* addr;
  uint32_t* r;
  int n;
  bool trans;
};

inline void ldmatrix_combine(void* const* recs, int, unsigned) {
  const LdmRec& r0 = *static_cast<LdmRec*>(recs[0]);
  uint16_t M[4][8][8];
  for (int m = 0; m < r0.n; ++m)
    for (int row = 0; row < 8; ++row) {
      const LdmRec& src = *static_cast<LdmRec*>(recs[8 * m + row]);
      if (reinterpret_cast<uintptr_t>(src.addr) % 16)
        fail("ldmatrix: lane %d's row address %p is not 16-byte aligned", 8 * m + row, src.addr);
      std::memcpy(M[m][row], src.addr, 16);
    }
  for (int lane = 0; lane < 32; ++lane) {
    const LdmRec& q = *static_cast<LdmRec*>(recs[lane]);
    const int g = lane >> 2, t = lane & 3;
    for (int m = 0; m < q.n; ++m) {
      const uint16_t lo = q.trans ? M[m][2 * t][g] : M[m][g][2 * t];
      const uint16_t hi = q.trans ? M[m][2 * t + 1][g] : M[m][g][2 * t + 1];
      q.r[m] = uint32_t(lo) | (uint32_t(hi) << 16);
    }
  }
}

__attribute__((always_inline)) inline void ldmatrix(uint32_t* r, int n, bool trans, const void* addr, const char* kind,
                     const char* file, int line) {
#if GSR_SIMT_RACECHECK
  if (lane_id() < 8 * n) race::read_here(addr, 16);  // the rows this lane addresses
#endif
  LdmRec rec{addr, r, n, trans};
  arrive({Scope::kWarp, kind, 0xffffffffu, file, line, &rec, &ldmatrix_combine});
}

// cp.async.cg 16 bytes: queued per thread, copied when a wait_group retires its group.
__attribute__((always_inline)) inline void cp_async16(void* dst, const void* src, int src_bytes) {
  if (reinterpret_cast<uintptr_t>(dst) % 16 || reinterpret_cast<uintptr_t>(src) % 16)
    fail("cp.async.cg: addresses %p <- %p are not 16-byte aligned", dst, src);
  if (src_bytes < 0 || src_bytes > 16) fail("cp.async.cg: src-size %d not in [0, 16]", src_bytes);
  async_issue({dst, src, src_bytes, 16 - src_bytes, nullptr});
}

// cvt.rna.tf32.f32: round to nearest, ties away from zero, to 10 explicit mantissa bits.
inline uint32_t to_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u)  // inf stays inf, NaN stays a (quiet) NaN
    return (u & 0xffffe000u) | ((u & 0x7fffffu) ? 0x400000u : 0u);
  return (u + 0x1000u) & 0xffffe000u;
}

}  // namespace ptx
}  // namespace gsr_simt
