// Tensor Core precisions and kernel configurations as types, in the manner of CuTe's MMA atoms
// (SM80_16x8x16_F32F16F16F32_TN) and flash-attention's kernel traits:
//   - an *atom* is one mma.sync instruction: its shape and register arrays;
//   - a *precision* (F16, BF16, TF32) is an atom plus its operand element in memory, the A
//     fragment a lane builds from its weights W, how a group's B (feature rows) is loaded from a
//     warp's shared buffer, and the padding of those shared rows;
//   - a *kernel traits* struct (MmaFwdTraits, MmaBwdTraits) fixes the precision, the channel
//     batch, the shared-memory layout and the static_asserts that tie them to the fragment maps
//     of gsrender/mma_fragments.h and the block shape of mma_tile.cuh.
// The kernels (rasterize_mma_fwd.cu, rasterize_mma_bwd.cu) are templated on a traits struct and
// never test which precision they run.
#pragma once
#include <cstdint>
#include <type_traits>

#include "gsrender/mma_bwd_fragments.h"
#include "gsrender/mma_fragments.h"
#include "gsrender/raster_args.h"
#include "gsrender/raster_plan.h"
#include "mma_operands.cuh"
#include "mma_tile.cuh"
#include "ptx.cuh"

namespace gsrender {
namespace gpu {
namespace {

// ---------------------------------------------------------------------------- atoms

// The m16n8kK atoms' register arrays: A 4 and B 2 .b32 registers, C/D 4 floats.
template <int kK_>
struct M16N8Registers {
  static constexpr int kM = 16, kN = 8, kK = kK_;
  using ARegs = uint32_t[4];
  using BRegs = uint32_t[2];
  using CRegs = float[4];
};

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32: D = A·B + D on one 16×8×16
// tile, each A / B register two 16-bit values (layouts: mma_fragments.h).
template <bool kBf16>
struct SM80_16x8x16_F32X16X16F32_TN : M16N8Registers<16> {
  __device__ __forceinline__ static void fma(CRegs& d, const ARegs& a, const BRegs& b) {
    if constexpr (kBf16)
      ptx::mma_m16n8k16_bf16(d, a, b, d);
    else
      ptx::mma_m16n8k16_f16(d, a, b, d);
  }
};
using SM80_16x8x16_F32F16F16F32_TN = SM80_16x8x16_F32X16X16F32_TN<false>;
using SM80_16x8x16_F32BF16BF16F32_TN = SM80_16x8x16_F32X16X16F32_TN<true>;

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: each A / B register one tf32.
struct SM80_16x8x8_F32TF32TF32F32_TN : M16N8Registers<8> {
  __device__ __forceinline__ static void fma(CRegs& d, const ARegs& a, const BRegs& b) {
    ptx::mma_m16n8k8_tf32(d, a, b, d);
  }
};

// ---------------------------------------------------------------------------- precisions
// Each: kKernel (the plan's kernel it is), Atom, Elem (operand bits in global and shared memory),
// Stored (mma_operands.cuh's conversion target), kPad (shared row padding in elements), AFrag
// (pack: the lane's W[row half][column] → the registers of one m16 block for one group of 16
// Gaussians) and accumulate (OUT += W·F for the group, B from the warp's [16][stride] rows).

// f16 / bf16: one m16n8k16 per (m16 block, 8 channels); B by ldmatrix.x2.trans. kPad: 16 bytes,
// so the 8 rows one ldmatrix phase reads fall in distinct banks.
template <bool kBf16_>
struct Half16 {
  static constexpr bool kBf16 = kBf16_;
  static constexpr RasterKernel kKernel = kBf16 ? RasterKernel::kMmaBF16 : RasterKernel::kMmaF16;
  using Atom = SM80_16x8x16_F32X16X16F32_TN<kBf16>;
  using Elem = uint16_t;
  using Stored = operands::Bits16<kBf16>;
  static constexpr int kPad = 8;
  static_assert(Atom::kK == mma::kK, "one atom consumes a whole group of 16 Gaussians");

  struct AFrag {
    uint32_t r[4];  // mma::pack_a's layout
    __device__ __forceinline__ void pack(const float (&w)[2][4]) { mma::pack_a<kBf16>(w, r); }
  };

  template <int kNT, int kStride>
  __device__ __forceinline__ static void accumulate(float (&acc)[2][kNT][4], const AFrag (&a)[2],
                                                    const Elem (&buf)[mma::kK][kStride], int lane,
                                                    int /*t*/) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      uint32_t bf[2];
      ptx::ldmatrix_x2_trans(bf, &buf[mma::ldmatrix_x2_row(lane)][nt * mma::kN]);
#pragma unroll
      for (int b = 0; b < 2; ++b) Atom::fma(acc[b][nt], a[b].r, bf);
    }
  }
};
using F16 = Half16<false>;
using BF16 = Half16<true>;

// tf32: two m16n8k8 per (m16 block, 8 channels). k is a free permutation of the group's columns
// as long as A and B agree: MMA m takes column 2t + 8m as k = t and column 2t + 1 + 8m as
// k = t + 4, so a lane feeds exactly its own W columns (j = 2m, 2m + 1) and B reads the matching
// feature rows with plain shared loads (ldmatrix moves 16-bit elements). kPad: 16 bytes.
struct TF32 {
  static constexpr RasterKernel kKernel = RasterKernel::kMmaTF32;
  using Atom = SM80_16x8x8_F32TF32TF32F32_TN;
  using Elem = float;
  using Stored = float;  // rounded to tf32 in the MMA loop
  static constexpr int kPad = 4;
  static_assert(2 * Atom::kK == mma::kK, "two atoms consume a group of 16 Gaussians");

  struct AFrag {
    uint32_t r[2][4];  // [m][a0..a3]: a0 = (g, k t), a1 = (g+8, t), a2 = (g, t+4), a3 = (g+8, t+4)
    __device__ __forceinline__ void pack(const float (&w)[2][4]) {
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        r[m][0] = ptx::to_tf32(w[0][2 * m]);
        r[m][1] = ptx::to_tf32(w[1][2 * m]);
        r[m][2] = ptx::to_tf32(w[0][2 * m + 1]);
        r[m][3] = ptx::to_tf32(w[1][2 * m + 1]);
      }
    }
  };

  template <int kNT, int kStride>
  __device__ __forceinline__ static void accumulate(float (&acc)[2][kNT][4], const AFrag (&a)[2],
                                                    const Elem (&buf)[mma::kK][kStride], int lane,
                                                    int t) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int m = 0; m < 2; ++m) {  // rows of MMA m: see AFrag
        const int ch = nt * mma::kN + mma::lane_group(lane);
        const uint32_t bf[2] = {ptx::to_tf32(buf[2 * t + 8 * m][ch]),
                                ptx::to_tf32(buf[2 * t + 1 + 8 * m][ch])};
#pragma unroll
        for (int b = 0; b < 2; ++b) Atom::fma(acc[b][nt], a[b].r[m], bf);
      }
  }
};

// ---------------------------------------------------------------------------- kernel traits

// The block shape every MMA kernel shares: a 16×16 tile as 8 warps of 8×4 sub-tiles, each two
// m16 row blocks; the chunk of list entries staged per pass is one per thread.
static_assert(kMmaWarps * mma::kSubW * mma::kSubH == 16 * 16, "8 sub-tiles of 8×4 cover the tile");
static_assert(mma::kBlocks * mma::kM == mma::kSubW * mma::kSubH, "two m16 blocks a sub-tile");
static_assert(kMmaThreads <= 256, "packed chunk slots are uint8_t");

// Forward: Prec, kNT n8 channel tiles per block (blockIdx.y = channel batch of kNT·8).
template <class Prec_, int kNT_>
struct MmaFwdTraits {
  using Prec = Prec_;
  using Elem = typename Prec::Elem;
  static constexpr int kNT = kNT_;
  static constexpr int kChannels = kNT * mma::kN;        // the block's channel batch
  static constexpr int kStride = kChannels + Prec::kPad;  // elements per shared feature row

  // The per-warp double buffer of the group's feature rows: [2][16 Gaussians][stride].
  struct FeatureBuffer {
    alignas(16) Elem v[2][mma::kK][kStride];
  };
  struct Shared {
    ChunkStage cs;                        // the chunk, its boxes, the warps' packed slots
    FeatureBuffer feat[kMmaWarps];        // per warp: the group's feature rows
    unsigned long long computed, useful;  // the tile's pair statistics
  };
  static_assert(kStride * sizeof(Elem) % 16 == 0, "cp.async / ldmatrix rows are 16-byte aligned");
  static_assert(kChannels * sizeof(Elem) % 16 == 0, "a row is whole 16-byte cp.async copies");
  // __launch_bounds__(kMmaThreads, 2): two blocks per SM must fit the 228 KB of sm_80/sm_90
  static_assert(sizeof(Shared) <= 48 * 1024, "static shared memory limit");
};

// Backward: 16-bit precisions only (v_W and v_F both go through ldmatrix).
template <class Prec_>
struct MmaBwdTraits {
  using Prec = Prec_;
  using Elem = typename Prec::Elem;
  static_assert(sizeof(Elem) == 2, "the backward stages f16 / bf16 operands");
  static constexpr int kChannels = mma::kBwdChannels;  // one k16 step of v_W, two n8 of v_F
  static constexpr int kStride = mma::kBwdStride;      // 48-byte rows: no bank conflicts
  static constexpr int kRows = mma::kBwdRows;          // a warp's sub-tile: two m16 blocks

  struct WarpBuffers {
    alignas(16) Elem g[kRows][kStride];    // Ĝ of the batch, row 16b + r = (block b, row r)
    alignas(16) Elem f[mma::kK][kStride];  // F̃ rows of the group's Gaussians
    alignas(16) Elem w[kRows][kStride];    // W of the group (cols 0–15), for Wᵀ
  };
  struct Shared {
    ChunkStage cs;
    WarpBuffers buf[kMmaWarps];
  };
  static_assert(kStride * sizeof(Elem) % 16 == 0, "cp.async / ldmatrix rows are 16-byte aligned");
  static_assert(kChannels == 2 * mma::kN && kChannels == mma::kK, "v_W's k16 = v_F's two n8");
  static_assert(sizeof(Shared) <= 48 * 1024, "static shared memory limit");
};

}  // namespace
}  // namespace gpu
}  // namespace gsrender
