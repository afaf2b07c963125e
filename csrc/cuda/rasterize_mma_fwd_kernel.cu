// Tensor Core forward rasterizer (docs/design.md §4, §5): float32 inputs, 16×16 tiles, sm_80+.
//
// Block = one tile, 8 warps; warp w owns the 8×4 sub-tile at (8·(w&1), 4·(w>>1)) of the tile,
// i.e. two m16 row blocks of 16 pixels (gsrender/mma_fragments.h has the pixel ↔ fragment maps).
// Per chunk of 256 list entries (one per thread, staged in shared memory with their exact
// α ≥ 1/255 support boxes):
//   1. packing (design 2): each warp compacts the chunk to the entries whose box meets its
//      sub-tile — ballot + popc, depth order kept — and walks them in groups of 16;
//   2. W (design 1): every lane evaluates α for its 2 pixels × 4 Gaussians per m16 block, the
//      quad scan gives each column its T and Compositor::take (gsrender/composite.h) its weight
//      and the exact 3DGS early stop (row_weights), and W goes straight into A-fragment
//      registers; no shared-memory round trip; the epilogue is the Compositor's too;
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
#include "mma_traits.cuh"

namespace gsrender {
namespace gpu {
namespace {

// Issues the cp.async copies of one group's feature rows (channels [c0, c0 + kNT·8)) and commits
// them as one group; rows past `count` (padding) and channels past the padded row are zero-filled.
template <class KT>
__device__ __forceinline__ void fetch_group(typename KT::Elem (&dst)[mma::kK][KT::kStride],
                                            const typename KT::Elem* feat, int64_t CHp,
                                            int64_t c0, const Stage<float>& s,
                                            const uint8_t* packed, int g0, int count, int lane) {
  using T = typename KT::Elem;
  constexpr int kPer16 = 16 / sizeof(T);         // elements per 16-byte copy
  constexpr int kSegs = KT::kChannels / kPer16;  // copies per row
  for (int q = lane; q < mma::kK * kSegs; q += 32) {
    const int r = q / kSegs, seg = q % kSegs;
    const int64_t ch = c0 + seg * kPer16;
    const bool ok = g0 + r < count && ch < CHp;
    const T* src = ok ? feat + int64_t(s.id[packed[g0 + r]]) * CHp + ch : feat;
    ptx::cp_async_cg16(&dst[r][seg * kPer16], src, ok ? 16 : 0);
  }
  ptx::cp_async_commit();
}

template <class KT, bool kSorted>
__global__ void __launch_bounds__(kMmaThreads, 2)  // ≤ 128 registers: 2 blocks per SM
    rasterize_mma_fwd_kernel(const RasterArgs<float> p, const FwdOut<float> o,
                             const typename KT::Elem* __restrict__ feat, int64_t CHp,
                             const float* __restrict__ ch_scale) {
  constexpr int kNT = KT::kNT;
  __shared__ typename KT::Shared sh;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = mma::lane_quad(lane);
  const TileRun run = tile_run(p, blockIdx.x);
  const int ox = subtile_x(run, warp), oy = subtile_y(run, warp);
  const int64_t c0 = int64_t(blockIdx.y) * KT::kChannels;  // the block's channel batch
  const mma::DeviceQuad quad;

  // The lane's 4 pixels: (ox + g, oy + 2b + h) for m16 block b and row half h, each with its
  // Compositor (gsrender/composite.h). done: outside the image, or (sorted) stopped at 3DGS's
  // T < 1e-4.
  bool done[2][2];
  Compositor<float> comp[2][2];
  int last[2][2];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      done[b][h] = !lane_inside(p, ox, oy, lane, b, h);
      comp[b][h] = {kSorted}, last[b][h] = run.start;
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
    fetch_group<KT>(buf[0], feat, CHp, c0, sh.cs.s, packed, 0, count, lane);
    int cur = 0;
    for (int g0 = 0; g0 < count; g0 += mma::kK, cur ^= 1) {
      if (__all_sync(kFullMask, all_done(done))) break;
      // 3. prefetch the next group's rows (an empty commit keeps the wait count uniform)
      if (g0 + mma::kK < count)
        fetch_group<KT>(buf[cur ^ 1], feat, CHp, c0, sh.cs.s, packed, g0 + mma::kK, count, lane);
      else
        ptx::cp_async_commit();

      // 2. the lane's 4 Gaussian columns, their α, W by the quad scan, straight into A fragments
      mma::LaneGaussians<float> lg;
      int pos1[4];
      float phi[4];
      lane_columns(sh.cs, packed, lane, g0, count, chunk0, lg, pos1, phi);
      typename KT::Prec::AFrag a[2];
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        float alpha[2][4], w[2][4];  // [row half][column]
        mma::lane_alpha<float>(lane, b, ox, oy, lg, alpha);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (t == 0 && !done[b][h]) computed += mma::kK;
          if constexpr (kSorted) {
            mma::row_weights(alpha[h], pos1, t, quad, comp[b][h], done[b][h], last[b][h], w[h]);
          } else {  // no early stop: done only marks pixels outside the image
#pragma unroll
            for (int j = 0; j < 4; ++j) alpha[h][j] = done[b][h] ? 0.0f : alpha[h][j];
            mma::row_weights_weighted(alpha[h], phi, quad, comp[b][h], w[h]);
          }
#pragma unroll
          for (int j = 0; j < 4; ++j) useful += w[h][j] > 0.0f;
        }
        a[b].pack(w);
      }

      ptx::cp_async_wait_group<1>();  // this group's rows have landed
      __syncwarp();
      KT::Prec::template accumulate<kNT>(acc, a, buf[cur], lane, t);
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
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t ch = c0 + nt * mma::kN + 2 * t + e;
          if (ch >= p.CH) continue;
          const float v = acc[b][nt][2 * h + e] * ch_scale[ch], bgv = bg ? bg[ch] : 0.0f;
          dst[ch] = comp[b][h].resolve(v, bgv, p.w_bg);
        }
      if (blockIdx.y == 0 && t == 0) {  // the quad agrees on the pixel state
        o.alphas[pix] = 1.0f - comp[b][h].trans;
        o.last_ids[pix] = kSorted ? last[b][h] : run.end;
        o.aux[pix] = comp[b][h].aux(p.w_bg);
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

// The workspace: colors [C·N, CH] → feat [C·N, CHp] in the operand type, rows padded with zeros
// to 16 bytes, each channel divided by its max |value| (scale [CH], applied again in the
// epilogue). The scale keeps fp16's range (±65504) from turning large channels such as far
// depths into inf (and 0·inf into NaN) and costs nothing in relative precision.
struct FwdLayout {
  void* feat;
  float* scale;
  int64_t CHp;
  size_t total;
  FwdLayout(const RasterArgs<float>& p, RasterKernel kernel, void* base) {
    const int64_t elem = kernel == RasterKernel::kMmaTF32 ? 4 : 2;
    CHp = operands::padded_channels(p.CH, elem);
    launch::Carver c(base);
    feat = c.take<char>(p.C * p.N * CHp * elem);
    scale = c.take<float>(p.CH);
    total = c.used();
  }
};

// Converts colors into the workspace's operand rows (see FwdLayout) and launches the kernel of
// traits KT: one block per (tile, channel batch).
template <class KT>
cudaError_t launch_kernel(const RasterArgs<float>& p, const FwdOut<float>& o, const FwdLayout& l,
                          int64_t n_tiles, cudaStream_t stream) {
  namespace op = operands;
  const op::Source src{p.colors, p.C * p.N, p.CH};
  GSR_CUDA_TRY(op::absmax_scale(src, /*per_channel=*/true, l.scale, stream));
  GSR_CUDA_TRY(op::convert<typename KT::Prec::Stored>(src, l.scale, nullptr, l.CHp, l.feat, stream));
  const auto* feat = static_cast<const typename KT::Elem*>(l.feat);
  const dim3 grid(static_cast<unsigned>(n_tiles),
                  static_cast<unsigned>((p.CH + KT::kChannels - 1) / KT::kChannels));
  if (p.sorted)
    GSR_LAUNCH(grid, kMmaThreads, 0, stream, rasterize_mma_fwd_kernel<KT, true>)(p, o, feat, l.CHp,
                                                                               l.scale);
  else
    GSR_LAUNCH(grid, kMmaThreads, 0, stream, rasterize_mma_fwd_kernel<KT, false>)(p, o, feat, l.CHp,
                                                                                l.scale);
  return cudaGetLastError();
}

}  // namespace
}  // namespace gpu

namespace launch {

size_t rasterize_mma_fwd_workspace_bytes(const RasterArgs<float>& p, RasterKernel kernel) {
  return gpu::FwdLayout(p, kernel, nullptr).total;
}

cudaError_t launch_rasterize_mma_fwd(const RasterFwdArgs<float>& a, RasterKernel kernel,
                                     Workspace ws, cudaStream_t stream) {
  const RasterArgs<float>& p = a.in;
  const int64_t n_tiles = raster_tiles(p);
  const gpu::FwdLayout l(p, kernel, ws.ptr);
  if (ws.bytes < l.total) return cudaErrorInvalidValue;
  if (n_tiles == 0) return cudaSuccess;
  using gpu::MmaFwdTraits;
  using gpu::launch_kernel;
  // Build time is a budget (CI compiles every instantiation for two archs on 2 cores): only the
  // default fp16 path gets the narrow 8-channel variant for RGB + depth; bf16 and tf32 run their
  // wide batch for every channel count (masked, correct, a few idle MMAs when CH ≤ 8).
  switch (kernel) {
    case RasterKernel::kMmaBF16:
      return launch_kernel<MmaFwdTraits<gpu::BF16, 4>>(p, a.out, l, n_tiles, stream);
    case RasterKernel::kMmaTF32:
      return launch_kernel<MmaFwdTraits<gpu::TF32, 2>>(p, a.out, l, n_tiles, stream);
    case RasterKernel::kMmaF16:
      if (p.CH <= mma::kN) return launch_kernel<MmaFwdTraits<gpu::F16, 1>>(p, a.out, l, n_tiles, stream);
      return launch_kernel<MmaFwdTraits<gpu::F16, 4>>(p, a.out, l, n_tiles, stream);
    default:
      return cudaErrorInvalidValue;  // the scalar kernel runs launch_rasterize_fwd
  }
}

}  // namespace launch
}  // namespace gsrender
