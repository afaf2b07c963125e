// Tensor Core forward rasterizer (docs/design.md §4, §5): float32 inputs, 16×16 tiles, sm_80+.
//
// Block = one tile, 8 warps; warp w owns the 8×4 sub-tile at (8·(w&1), 4·(w>>1)) of the tile,
// i.e. two m16 row blocks of 16 pixels (gsrender/mma_fragments.h has the pixel ↔ fragment maps).
// Per chunk of 256 list entries (one per thread, staged in shared memory with their exact
// α ≥ 1/255 support boxes):
//   1. packing (design 2): each warp compacts the chunk to the entries whose box meets its
//      sub-tile — ballot + popc, depth order kept — and walks them in groups of 16;
//   2. W (design 1): every lane evaluates α for its 2 pixels × 4 Gaussians per m16 block, the
//      quad scan gives T and the exact 3DGS early stop (row_weights), and W goes straight into
//      A-fragment registers; no shared-memory round trip;
//   3. lazy channel-batched fetch (design 3): only the group's 16 feature rows of this block's
//      channel batch are copied, with cp.async into a per-warp double buffer (group i+1 loads
//      while group i computes its W), then B comes from ldmatrix.trans (f16/bf16) or plain
//      shared loads (tf32) and OUT += W·F is one MMA per (m16 block, 8 channels).
// Channels: blockIdx.y is the channel batch (8 or 32 channels for f16/bf16, 8 or 16 for tf32);
// batches recompute W instead of sharing it through shared memory: W costs 16 exps per lane and
// group, the batch's MMAs 2·kNT, and recomputing keeps shared memory at ~34 KB a block (≥ 6
// blocks per SM) for any D, with no cross-warp synchronisation inside a chunk. The feature rows
// are read from a copy of colors scaled per channel, converted to the operand type and padded to
// 16 bytes a row (the padding channels are zero and never written out), so any D works with one
// masked tail.
#include "gsrender/launch/rasterize.h"
#include "gsrender/mma_fragments.h"
#include "mma_operands.cuh"
#include "mma_tile.cuh"
#include "ptx.cuh"

namespace gsrender {
namespace gpu {
namespace {


// Operand type of a precision: 16-bit storage (ldmatrix B) or 32-bit (tf32, B from shared loads).
// kPad pads a shared row by 16 bytes so the 8 rows one ldmatrix phase reads hit distinct banks.
template <int kImpl>
struct Operand {
  using T = uint16_t;  // f16 / bf16 bits
  static constexpr int kPad = 8;
};
template <>
struct Operand<kImplMatrixTF32> {
  using T = float;
  static constexpr int kPad = 4;
};

// A fragment(s) of one m16 block for one group of 16 Gaussians, built from the lane's W
// (w[h][j]: row half h, column j = Gaussian 2t, 2t+1, 2t+8, 2t+9 of the group).
template <int kImpl>
struct AFrag {
  uint32_t r[4];  // m16n8k16 A, f16x2 / bf16x2 registers (mma::pack_a's layout)
  __device__ __forceinline__ void pack(const float (&w)[2][4]) {
    mma::pack_a<kImpl == kImplMatrixBF16>(w, r);
  }
};
// tf32: two m16n8k8 MMAs per group. k is a free permutation of the group's columns as long as A
// and B agree: MMA m takes column 2t + 8m as k = t and column 2t + 1 + 8m as k = t + 4, so a
// lane feeds exactly its own W columns (j = 2m, 2m + 1) and B reads the matching feature rows.
template <>
struct AFrag<kImplMatrixTF32> {
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

// The per-warp double buffer of feature rows: [2][16 Gaussians][kNT·8 channels + pad].
template <int kImpl, int kNT>
struct FeatureBuffer {
  using T = typename Operand<kImpl>::T;
  static constexpr int kStride = kNT * mma::kN + Operand<kImpl>::kPad;
  alignas(16) T v[2][mma::kK][kStride];
};

template <int kImpl, int kNT>
struct MmaShared {
  ChunkStage cs;                             // the chunk, its boxes, the warps' packed slots
  FeatureBuffer<kImpl, kNT> feat[kMmaWarps];    // per warp: the group's feature rows
  unsigned long long computed, useful;       // the tile's pair statistics
};

// Issues the cp.async copies of one group's feature rows (channels [c0, c0 + kNT·8)) and commits
// them as one group; rows past `count` (padding) and channels past the padded row are zero-filled.
template <int kImpl, int kNT>
__device__ __forceinline__ void fetch_group(typename FeatureBuffer<kImpl, kNT>::T (*dst)[FeatureBuffer<kImpl, kNT>::kStride],
                                            const typename Operand<kImpl>::T* feat, int64_t CHp,
                                            int64_t c0, const Stage<float>& s,
                                            const uint8_t* packed, int g0, int count, int lane) {
  using T = typename Operand<kImpl>::T;
  constexpr int kPer16 = 16 / sizeof(T);        // elements per 16-byte copy
  constexpr int kSegs = kNT * mma::kN / kPer16;  // copies per row
  for (int q = lane; q < mma::kK * kSegs; q += 32) {
    const int r = q / kSegs, seg = q % kSegs;
    const int64_t ch = c0 + seg * kPer16;
    const bool ok = g0 + r < count && ch < CHp;
    const T* src = ok ? feat + int64_t(s.id[packed[g0 + r]]) * CHp + ch : feat;
    ptx::cp_async_cg16(&dst[r][seg * kPer16], src, ok ? 16 : 0);
  }
  ptx::cp_async_commit();
}

template <int kImpl, int kNT, bool kSorted>
__global__ void __launch_bounds__(kMmaThreads, 2)  // ≤ 128 registers: 2 blocks per SM
    rasterize_mma_fwd_kernel(const RasterArgs<float> p, const FwdOut<float> o,
                             const typename Operand<kImpl>::T* __restrict__ feat, int64_t CHp,
                             const float* __restrict__ ch_scale) {
  __shared__ MmaShared<kImpl, kNT> sh;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = mma::lane_quad(lane);
  const TileRun run = tile_run(p, blockIdx.x);
  const int ox = subtile_x(run, warp), oy = subtile_y(run, warp);
  const int64_t c0 = int64_t(blockIdx.y) * kNT * mma::kN;  // the block's channel batch
  const mma::DeviceQuad quad;

  // The lane's 4 pixels: (ox + g, oy + 2b + h) for m16 block b and row half h.
  // done: outside the image, or (sorted) stopped at 3DGS's T < 1e-4.
  bool done[2][2];
  float trans[2][2], wsum[2][2];
  int last[2][2];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      done[b][h] = !lane_inside(p, ox, oy, lane, b, h);
      trans[b][h] = 1.0f, wsum[b][h] = 0.0f, last[b][h] = run.start;
    }
  float acc[2][kNT][4];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int n = 0; n < kNT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[b][n][i] = 0.0f;
  if (threadIdx.x == 0) sh.computed = sh.useful = 0;  // published by the first barrier below
  int32_t walked = run.start;
  auto& buf = sh.feat[warp].v;
  const uint8_t* packed = sh.cs.packed[warp];

  for (int32_t chunk0 = run.start; chunk0 < run.end; chunk0 += kMmaThreads) {
    const bool warp_done = __all_sync(kFullMask, all_done(done));
    const int n = begin_chunk(sh.cs, p, chunk0, run.end, lane, warp_done);
    if (n < 0) break;  // all sub-tiles saturated
    walked = chunk0 + n;
    if (warp_done) continue;

    // 1. packing: slots of the chunk whose support meets this warp's sub-tile, in list order
    const int count = pack_subtile(sh.cs, warp, lane, n, ox, oy);
    if (count == 0) continue;

    unsigned computed = 0, useful = 0;  // this chunk's pairs (per lane ≤ 4 rows × 256 × 16)
    fetch_group<kImpl, kNT>(buf[0], feat, CHp, c0, sh.cs.s, packed, 0, count, lane);
    int cur = 0;
    for (int g0 = 0; g0 < count; g0 += mma::kK, cur ^= 1) {
      if (__all_sync(kFullMask, all_done(done))) break;
      // 3. prefetch the next group's rows (an empty commit keeps the wait count uniform)
      if (g0 + mma::kK < count)
        fetch_group<kImpl, kNT>(buf[cur ^ 1], feat, CHp, c0, sh.cs.s, packed, g0 + mma::kK, count,
                                lane);
      else
        ptx::cp_async_commit();

      // 2. the lane's 4 Gaussian columns, their α, W by the quad scan, straight into A fragments
      mma::LaneGaussians<float> lg;
      int pos1[4];
      float phi[4];
      lane_columns(sh.cs, packed, lane, g0, count, chunk0, lg, pos1, phi);
      AFrag<kImpl> a[2];
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        float alpha[2][4], w[2][4];  // [row half][column]
        mma::lane_alpha<float>(lane, b, ox, oy, lg, alpha);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (t == 0 && !done[b][h]) computed += mma::kK;
          if constexpr (kSorted) {
            mma::row_weights(alpha[h], pos1, t, quad, trans[b][h], done[b][h], last[b][h], w[h]);
          } else {  // no early stop: done only marks pixels outside the image
#pragma unroll
            for (int j = 0; j < 4; ++j) alpha[h][j] = done[b][h] ? 0.0f : alpha[h][j];
            mma::row_weights_weighted(alpha[h], phi, quad, trans[b][h], wsum[b][h], w[h]);
          }
#pragma unroll
          for (int j = 0; j < 4; ++j) useful += w[h][j] > 0.0f;
        }
        a[b].pack(w);
      }

      ptx::cp_async_wait_group<1>();  // this group's rows have landed
      __syncwarp();
      if constexpr (kImpl == kImplMatrixTF32) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int m = 0; m < 2; ++m) {  // rows of MMA m: see AFrag<tf32>
            const int ch = nt * mma::kN + mma::lane_group(lane);
            const uint32_t bf[2] = {ptx::to_tf32(buf[cur][2 * t + 8 * m][ch]),
                                    ptx::to_tf32(buf[cur][2 * t + 1 + 8 * m][ch])};
#pragma unroll
            for (int b = 0; b < 2; ++b) ptx::mma_m16n8k8_tf32(acc[b][nt], a[b].r[m], bf, acc[b][nt]);
          }
      } else {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          uint32_t bf[2];
          ptx::ldmatrix_x2_trans(bf, &buf[cur][mma::ldmatrix_x2_row(lane)][nt * mma::kN]);
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            if constexpr (kImpl == kImplMatrixBF16)
              ptx::mma_m16n8k16_bf16(acc[b][nt], a[b].r, bf, acc[b][nt]);
            else
              ptx::mma_m16n8k16_f16(acc[b][nt], a[b].r, bf, acc[b][nt]);
          }
        }
      }
      __syncwarp();  // every lane is done reading buf[cur] before it is refilled
    }
    ptx::cp_async_wait_group<0>();  // nothing in flight into buffers the next chunk reuses
    computed = warp_sum(computed);
    useful = warp_sum(useful);
    if (lane == 0) atomicAdd(&sh.computed, computed), atomicAdd(&sh.useful, useful);
  }

  // Epilogue: C element i of block b is pixel row half h = i >> 1, channel 2t + (i & 1).
  const float* bg = p.backgrounds ? p.backgrounds + run.cam * p.CH : nullptr;
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!lane_inside(p, ox, oy, lane, b, h)) continue;
      const int64_t pix =
          (run.cam * p.height + oy + mma::lane_py(b, h)) * p.width + ox + mma::lane_px(lane);
      float* dst = o.render + pix * p.CH;
      const float denom = wsum[b][h] + p.w_bg;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t ch = c0 + nt * mma::kN + 2 * t + e;
          if (ch >= p.CH) continue;
          const float v = acc[b][nt][2 * h + e] * ch_scale[ch], bgv = bg ? bg[ch] : 0.0f;
          dst[ch] = kSorted ? v + trans[b][h] * bgv : (v + p.w_bg * bgv) / denom;
        }
      if (blockIdx.y == 0 && t == 0) {  // the quad agrees on the pixel state
        o.alphas[pix] = 1.0f - trans[b][h];
        o.last_ids[pix] = kSorted ? last[b][h] : run.end;
        o.aux[pix] = kSorted ? trans[b][h] : denom;
      }
    }
  __syncthreads();  // every warp's counts are in
  if (blockIdx.y == 0 && threadIdx.x == 0) {  // statistics once per tile
    unsigned long long* st = reinterpret_cast<unsigned long long*>(o.stats + 3 * run.cam);
    atomicAdd(st, static_cast<unsigned long long>((walked - run.start) * tile_pixels(p, run)));
    atomicAdd(st + 1, sh.computed);
    atomicAdd(st + 2, sh.useful);
  }
}

template <int kImpl, int kNT>
cudaError_t launch_kernel(const RasterArgs<float>& p, const FwdOut<float>& o,
                   const typename Operand<kImpl>::T* feat, int64_t CHp, const float* scale,
                   int64_t n_tiles, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(n_tiles),
                  static_cast<unsigned>((p.CH + kNT * mma::kN - 1) / (kNT * mma::kN)));
  if (p.sorted)
    GSR_LAUNCH(grid, kMmaThreads, 0, stream, rasterize_mma_fwd_kernel<kImpl, kNT, true>)(p, o, feat, CHp,
                                                                                 scale);
  else
    GSR_LAUNCH(grid, kMmaThreads, 0, stream, rasterize_mma_fwd_kernel<kImpl, kNT, false>)(p, o, feat, CHp,
                                                                                  scale);
  return cudaGetLastError();
}

// The workspace: colors [C·N, CH] → feat [C·N, CHp] in the operand type, rows padded with zeros
// to 16 bytes, each channel divided by its max |value| (scale [CH], applied again in the
// epilogue). The scale keeps fp16's range (±65504) from turning large channels such as far
// depths into inf (and 0·inf into NaN) and costs nothing in relative precision.
struct FwdLayout {
  void* feat;
  float* scale;
  int64_t CHp;
  size_t total;
  FwdLayout(const RasterArgs<float>& p, int64_t impl, void* base) {
    const int64_t elem = impl == kImplMatrixTF32 ? 4 : 2;
    CHp = operands::padded_channels(p.CH, elem);
    launch::Carver c(base);
    feat = c.take<char>(p.C * p.N * CHp * elem);
    scale = c.take<float>(p.CH);
    total = c.used();
  }
};

}  // namespace
}  // namespace gpu

namespace launch {

size_t rasterize_mma_fwd_workspace_bytes(const RasterArgs<float>& p, int64_t impl) {
  return gpu::FwdLayout(p, impl, nullptr).total;
}

cudaError_t launch_rasterize_mma_fwd(const RasterFwdArgs<float>& a, int64_t impl, Workspace ws,
                                     cudaStream_t stream) {
  using gpu::launch_kernel;
  namespace op = gpu::operands;
  const RasterArgs<float>& p = a.in;
  const int64_t n_tiles = raster_tiles(p);
  const gpu::FwdLayout l(p, impl, ws.ptr);
  if (ws.bytes < l.total) return cudaErrorInvalidValue;
  if (n_tiles == 0) return cudaSuccess;
  const op::Source src{p.colors, p.C * p.N, p.CH};
  GSR_CUDA_TRY(op::absmax_scale(src, /*per_channel=*/true, l.scale, stream));
  // Build time is a budget (CI compiles every instantiation for two archs on 2 cores): only the
  // default fp16 path gets the narrow 8-channel variant for RGB + depth; bf16 and tf32 run their
  // wide batch for every channel count (masked, correct, a few idle MMAs when CH ≤ 8).
  switch (impl) {
    case kImplMatrixBF16: {
      GSR_CUDA_TRY(op::convert<op::Bits16<true>>(src, l.scale, nullptr, l.CHp, l.feat, stream));
      const auto* f = static_cast<const uint16_t*>(l.feat);
      return launch_kernel<kImplMatrixBF16, 4>(p, a.out, f, l.CHp, l.scale, n_tiles, stream);
    }
    case kImplMatrixTF32: {
      GSR_CUDA_TRY(op::convert<float>(src, l.scale, nullptr, l.CHp, l.feat, stream));
      const auto* f = static_cast<const float*>(l.feat);
      return launch_kernel<kImplMatrixTF32, 2>(p, a.out, f, l.CHp, l.scale, n_tiles, stream);
    }
    case kImplMatrixF16: {
      GSR_CUDA_TRY(op::convert<op::Bits16<false>>(src, l.scale, nullptr, l.CHp, l.feat, stream));
      const auto* f = static_cast<const uint16_t*>(l.feat);
      if (p.CH <= mma::kN)
        return launch_kernel<kImplMatrixF16, 1>(p, a.out, f, l.CHp, l.scale, n_tiles, stream);
      return launch_kernel<kImplMatrixF16, 4>(p, a.out, f, l.CHp, l.scale, n_tiles, stream);
    }
    default:
      return cudaErrorInvalidValue;  // the scalar impl runs launch_rasterize_fwd
  }
}

}  // namespace launch
}  // namespace gsrender
