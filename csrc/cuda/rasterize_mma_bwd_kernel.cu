// Tensor Core backward rasterizer (docs/design.md §4 backward, §5): float32 inputs, 16×16 tiles, sm_80+,
// f16 or bf16 operands with f32 accumulation. The tiles, warps, packing and the W recompute are
// the forward kernel's (rasterize_mma_fwd.cu): one block per tile, one 8×4 sub-tile per warp, the
// list walked front to back in chunks of 256, packed per warp into groups of 16, W rebuilt in
// registers by the same quad scan and Compositor (so the stop is exactly the forward's). Per group:
//   v_W = G·Fᵀ  (pixels × Gaussians, k over channels)      A = G from shared (ldmatrix),
//                                                          B = F rows (ldmatrix)
//   v_F = Wᵀ·G  (Gaussians × channels, k over pixels)     A = Wᵀ (W staged in shared, ldmatrix
//                                                          .trans), B = G (ldmatrix .trans)
// one channel batch of 16 at a time (G and F rows fetched with cp.async), v_F added to v_colors
// with one atomic per (Gaussian, channel) and warp. Then per pair, elementwise, the per-pixel
// state and the step are CompositorGrad's (gsrender/composite.h), walking front to back
// (kFrontToBack), with T_k = w_k/α_k:
//   sorted:   v_α_k = T_k·v_w_k − S_k/(1 − α_k), with S_k = Σ_{j>k} w_j·v_w_j + T_final·(G·bg − v_α)
//             computed front to back as S_total − Σ_{j≤k} w_j·v_w_j, S_total = G·OUT − T_final·v_α
//             (G·OUT over every channel, background included, is known from the forward output;
//             seed_kernel seals it per pixel), the in-row prefix by a quad scan
//             (mma::row_suffix_sums);
//   weighted: g = G/(Σw + w_bg), v_α_k = (g·f_k − g·OUT)·φ_k + v_α·T_final/(1 − α_k),
//             v_depth_k = (g·f_k − g·OUT)·α_k·φ'(z_k);
// and AlphaGrad (gsrender/alpha.h) to the 2D parameters, reduced over the 8 lanes that share a
// column before one atomic per (Gaussian, parameter) and warp. v_backgrounds is a plain reduction
// over pixels (CompositorGrad::v_bg), a separate kernel of the launcher.
// Operand scaling (no host sync; the launcher prepares the operands on the device with
// mma_operands.cuh):
// Ĝ = G / s_G per channel (s_G = max |G| of the channel), so fp16 keeps the small loss
// gradients out of its subnormal range; v_F is rescaled by s_G per channel.
// v_W needs Σ_c G_c F_c, so F is stored as F·s_G / s_F with one global s_F = max |F·s_G|, and v_W
// is rescaled by s_F.
// The per-lane index maps and arithmetic live in gsrender/mma_bwd_fragments.h; only PTX and memory
// traffic stay here.
#include "gsrender/launch/rasterize.h"
#include "mma_traits.cuh"

namespace gsrender {
namespace gpu {
namespace {

struct BwdArgs {
  const uint16_t* g;      // [C·H·W, CHp] Ĝ (weighted: already divided by Σw + w_bg)
  const uint16_t* f;      // [C·N, CHp] F̃
  const float* g_scale;   // [CH] s_G
  const float* f_scale;   // [1] s_F
  const float* seed;      // [C·H·W] CompositorGrad's sealed s: S_total (weighted: g·OUT)
  int64_t CHp;
};

template <class KT, bool kSorted>
__global__ void __launch_bounds__(kMmaThreads, 1)
    rasterize_mma_bwd_kernel(const RasterArgs<float> p, const RasterBwdIO<float> io,
                             const BwdArgs ba) {
  using Atom = typename KT::Prec::Atom;
  constexpr int kCB = KT::kChannels;
  __shared__ typename KT::Shared sh;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = mma::lane_quad(lane);
  const int gq = mma::lane_group(lane);
  const TileRun run = tile_run(p, blockIdx.x);
  const int ox = subtile_x(run, warp), oy = subtile_y(run, warp);
  const mma::DeviceQuad quad;
  const mma::DeviceWarp warp_x;
  auto& wb = sh.buf[warp];
  const uint8_t* packed = sh.cs.packed[warp];
  const float s_f = *ba.f_scale;

  // The lane's 4 pixels (block b, row half h): the forward's state (sorted: the recompute's
  // Compositor), then the gradient's (CompositorGrad front to back; all zero outside the image).
  using Grad = CompositorGrad<float, float, /*kFrontToBack=*/true>;
  bool done[2][2];
  Compositor<float> comp[2][2];
  Grad grad[2][2];
  int last[2][2];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const bool in = lane_inside(p, ox, oy, lane, b, h);
      done[b][h] = !in;
      comp[b][h] = {true}, last[b][h] = run.start;
      grad[b][h] = {kSorted};
      if (in) {
        const int64_t pix =
            (run.cam * p.height + oy + mma::lane_py(b, h)) * p.width + ox + mma::lane_px(lane);
        grad[b][h].start(io.aux[pix], io.alphas[pix], io.v_alphas[pix], ba.seed[pix]);
      }
    }

  for (int32_t chunk0 = run.start; chunk0 < run.end; chunk0 += kMmaThreads) {
    const bool warp_done = __all_sync(kFullMask, all_done(done));
    const int n = begin_chunk(sh.cs, p, chunk0, run.end, lane, warp_done);
    if (n < 0) break;  // all sub-tiles done
    if (warp_done) continue;
    const int count = pack_subtile(sh.cs, warp, lane, n, ox, oy);

    for (int g0 = 0; g0 < count; g0 += mma::kK) {
      if (__all_sync(kFullMask, all_done(done))) break;
      // ---- W of the group (forward recompute), staged as f16/bf16 rows for Wᵀ
      mma::LaneGaussians<float> lg;
      int pos1[4];
      float phi[4];
      lane_columns(sh.cs, packed, lane, g0, count, chunk0, lg, pos1, phi);
      __syncwarp();  // the previous group's ldmatrix reads of the W rows are done
      float alpha[2][2][4], w[2][2][4];
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        mma::lane_alpha<float>(lane, b, ox, oy, lg, alpha[b]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if constexpr (kSorted) {
            mma::row_weights(alpha[b][h], pos1, t, quad, comp[b][h], done[b][h], last[b][h],
                             w[b][h]);
          } else {  // w = α·φ; the forward's Σw and Π(1 − α) come from aux / alphas
            Compositor<float> cols{false};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              alpha[b][h][j] = done[b][h] ? 0.0f : alpha[b][h][j];
              w[b][h][j] = cols.advance(true, alpha[b][h][j], phi[j]);
            }
          }
          // W rows (pixel 16b + g + 8h), columns 2t, 2t+1 | 2t+8, 2t+9, as f16x2 / bf16x2 pairs
          uint32_t* row = reinterpret_cast<uint32_t*>(wb.w[mma::w_stage_row(lane, b, h)]);
          mma::w_stage_words<KT::Prec::kBf16>(w[b][h], row[t], row[4 + t]);
        }
      }

      // ---- channel batches: v_W (registers) and v_F (atomics into v_colors)
      float v_w[2][2][4];  // [block][Gaussian n8 tile][C element]
#pragma unroll
      for (int b = 0; b < 2; ++b)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) v_w[b][nt][e] = 0.0f;
      for (int64_t c0 = 0; c0 < ba.CHp; c0 += kCB) {
        __syncwarp();  // the previous batch's (and the W staging's) readers are done
#pragma unroll
        for (int q = lane; q < 2 * KT::kRows; q += 32) {  // Ĝ rows of the sub-tile's pixels
          const mma::SmemAt at = mma::g_stage(q);
          const int b = at.row >> 4, rr = at.row & 15;
          const int x = ox + mma::subtile_px(b, rr), y = oy + mma::subtile_py(b, rr);
          const int64_t ch = c0 + at.col;
          const bool ok = x < p.width && y < p.height && ch < ba.CHp;
          const int64_t pix = (run.cam * p.height + y) * p.width + x;
          ptx::cp_async_cg16(&wb.g[at.row][at.col], ok ? ba.g + pix * ba.CHp + ch : ba.g,
                             ok ? 16 : 0);
        }
        {  // F̃ rows of the group
          const mma::SmemAt at = mma::f_stage(lane);
          const int64_t ch = c0 + at.col;
          const bool ok = g0 + at.row < count && ch < ba.CHp;
          const uint16_t* src =
              ok ? ba.f + int64_t(sh.cs.s.id[packed[g0 + at.row]]) * ba.CHp + ch : ba.f;
          ptx::cp_async_cg16(&wb.f[at.row][at.col], src, ok ? 16 : 0);
        }
        ptx::cp_async_commit();
        ptx::cp_async_wait_group<0>();
        __syncwarp();
        uint32_t bf[4];  // F̃ as B: n8 tile 0 = {bf[0], bf[1]}, tile 1 = {bf[2], bf[3]}
        const mma::SmemAt fb = mma::dw_b_at(lane);
        ptx::ldmatrix_x4(bf, &wb.f[fb.row][fb.col]);
        const uint32_t b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          uint32_t ga[4];  // Ĝ of block b as A (rows = pixels, k = channels)
          const mma::SmemAt at = mma::dw_a_at(lane, b);
          ptx::ldmatrix_x4(ga, &wb.g[at.row][at.col]);
          Atom::fma(v_w[b][0], ga, b0);
          Atom::fma(v_w[b][1], ga, b1);
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {  // v_F for channels c0 + 8nt .. + 7
          float df[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            uint32_t wa[4], gb[2];  // Wᵀ of block b as A, Ĝ of block b as B
            const mma::SmemAt wat = mma::df_a_at(lane, b), gat = mma::df_b_at(lane, b, nt);
            ptx::ldmatrix_x4_trans(wa, &wb.w[wat.row][wat.col]);
            ptx::ldmatrix_x2_trans(gb, &wb.g[gat.row][gat.col]);
            Atom::fma(df, wa, gb);
          }
#pragma unroll
          for (int e = 0; e < 4; ++e) {  // C element e: Gaussian column c_row, channel c_col
            const int k = g0 + mma::c_row(lane, e);
            const int64_t ch = c0 + 8 * nt + mma::c_col(lane, e);
            if (k < count && ch < p.CH && df[e] != 0.0f)
              atomicAdd(io.v_colors + int64_t(sh.cs.s.id[packed[k]]) * p.CH + ch,
                        df[e] * ba.g_scale[ch]);
          }
        }
      }

      // ---- per pair: v_α → the Gaussian's 2D parameters
      AlphaGrad<float> ag[4];
      float v_dep[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int b = 0; b < 2; ++b)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float v_wp[4];  // v_W of the lane's columns
          mma::lane_v_w(v_w[b], h, s_f, v_wp);
          // the pixel's gradient state at each of the lane's columns (sorted: S before it)
          Grad col[4] = {grad[b][h], grad[b][h], grad[b][h], grad[b][h]};
          if constexpr (kSorted) mma::row_suffix_sums(w[b][h], v_wp, t, quad, grad[b][h], col);
          const float pcx = ox + mma::lane_px(lane) + 0.5f, pcy = oy + mma::lane_py(b, h) + 0.5f;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float al = alpha[b][h][j], wj = w[b][h][j];
            if (!(wj > 0.0f)) continue;
            float net = 0.0f;  // weighted only
            const float v_al = col[j].step(al, kSorted ? wj / al : 0.0f, wj, v_wp[j], phi[j], &net);
            if constexpr (!kSorted) {
              const int e = packed[g0 + mma::lane_col(lane, j)];
              v_dep[j] += net * al * depth_weight_dz<float>(p.depths[sh.cs.s.id[e]], phi[j],
                                                             p.sigma_w, p.beta);
            }
            ag[j].add(v_al, al, lg.opacity[j], lg.a[j], lg.b[j], lg.c[j], lg.mx[j] - pcx,
                      lg.my[j] - pcy);
          }
        }
      // reduce each column over the 8 lanes that own it (same t), then one atomic per parameter
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float v[7] = {ag[j].v_mean_x, ag[j].v_mean_y, ag[j].v_a,      ag[j].v_b,
                      ag[j].v_c,      ag[j].v_opacity, v_dep[j]};
#pragma unroll
        for (int q = 0; q < 7; ++q) v[q] = mma::column_sum(v[q], warp_x);
        const int k = g0 + mma::lane_col(lane, j);
        if (gq == 0 && k < count) {
          const int64_t id = sh.cs.s.id[packed[k]];
          float* dst[7] = {io.v_means2d + 2 * id, io.v_means2d + 2 * id + 1, io.v_conics + 3 * id,
                           io.v_conics + 3 * id + 1, io.v_conics + 3 * id + 2,
                           io.v_opacities + id, io.v_depths + id};
#pragma unroll
          for (int q = 0; q < (kSorted ? 6 : 7); ++q)
            if (v[q] != 0.0f) atomicAdd(dst[q], v[q]);
        }
      }
    }
  }
}

template <class KT>
cudaError_t launch_kernel(const RasterArgs<float>& p, const RasterBwdIO<float>& io,
                          const BwdArgs& ba, int64_t n_tiles, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>(n_tiles);
  if (p.sorted)
    GSR_LAUNCH(grid, kMmaThreads, 0, stream, rasterize_mma_bwd_kernel<KT, true>)(p, io, ba);
  else
    GSR_LAUNCH(grid, kMmaThreads, 0, stream, rasterize_mma_bwd_kernel<KT, false>)(p, io, ba);
  return cudaGetLastError();
}

// seed[i] = pixel i's sealed CompositorGrad sum, front to back: S_total = Σ_c v_render·render −
// T_final·v_alphas (sorted), Σ_c g·render with g = v_render / aux (weighted), in channel order.
__global__ void seed_kernel(const RasterArgs<float> p, const RasterBwdIO<float> io,
                            float* __restrict__ seed) {
  const int64_t HW = int64_t(p.height) * p.width;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.C * HW) return;
  const float* bg = p.backgrounds ? p.backgrounds + (i / HW) * p.CH : nullptr;
  CompositorGrad<float, float, /*kFrontToBack=*/true> grad{p.sorted};
  grad.start(io.aux[i], io.alphas[i], io.v_alphas[i]);
  for (int64_t c = 0; c < p.CH; ++c)
    grad.channel(io.v_render[i * p.CH + c], bg ? bg[c] : 0.0f, io.render[i * p.CH + c]);
  grad.seal();
  seed[i] = grad.s;
}

// v_backgrounds[cam, c] = Σ over the camera's pixels of CompositorGrad::v_bg (sorted
// T_final·v_render, weighted w_bg·v_render / aux): one block per (camera, channel), a
// fixed-order tree in shared memory.
__global__ void __launch_bounds__(operands::kThreads)
    v_backgrounds_kernel(const RasterArgs<float> p, const RasterBwdIO<float> io) {
  __shared__ float red[operands::kThreads];
  const int64_t cam = blockIdx.x / p.CH, c = blockIdx.x % p.CH;
  const int64_t HW = int64_t(p.height) * p.width;
  float sum = 0.0f;
  for (int64_t q = threadIdx.x; q < HW; q += blockDim.x) {
    const int64_t pix = cam * HW + q;
    CompositorGrad<float> grad{p.sorted};
    grad.start(io.aux[pix], io.alphas[pix], /*v_alpha=*/0.0f);  // v_bg reads T_final, the scale
    sum += grad.v_bg(io.v_render[pix * p.CH + c], p.w_bg);
  }
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int off = blockDim.x / 2; off > 0; off >>= 1) {
    if (static_cast<int>(threadIdx.x) < off) red[threadIdx.x] += red[threadIdx.x + off];
    __syncthreads();
  }
  if (threadIdx.x == 0) io.v_backgrounds[cam * p.CH + c] = red[0];
}

// The workspace (the operands are described above): Ĝ [P, CHp], F̃ [C·N, CHp]
// (f16 / bf16 bits), s_G [CH], s_F [1], the seeds [P].
struct BwdLayout {
  uint16_t *g, *f;
  float *g_scale, *f_scale, *seed;
  int64_t P, CHp;
  size_t total;
  BwdLayout(const RasterArgs<float>& p, void* base) {
    P = p.C * p.height * p.width;
    CHp = operands::padded_channels(p.CH, 2);
    launch::Carver c(base);
    g = c.take<uint16_t>(P * CHp);
    f = c.take<uint16_t>(p.C * p.N * CHp);
    g_scale = c.take<float>(p.CH);
    f_scale = c.take<float>(1);
    seed = c.take<float>(P);
    total = c.used();
  }
};

template <class KT>
cudaError_t prepare_and_launch(const RasterArgs<float>& p, const RasterBwdIO<float>& io,
                               const BwdLayout& l, int64_t n_tiles, cudaStream_t stream) {
  namespace op = operands;
  using Bits = typename KT::Prec::Stored;
  // G = v_render (weighted: / (Σw + w_bg)); s_G per channel; Ĝ = G / s_G
  const op::Source g{io.v_render, l.P, p.CH, p.sorted ? nullptr : io.aux};
  GSR_LAUNCH(op::blocks(l.P), op::kThreads, 0, stream, seed_kernel)(p, io, l.seed);
  GSR_CUDA_TRY(cudaGetLastError());
  GSR_CUDA_TRY(op::absmax_scale(g, /*per_channel=*/true, l.g_scale, stream));
  GSR_CUDA_TRY(op::convert<Bits>(g, l.g_scale, nullptr, l.CHp, l.g, stream));
  // F·s_G; s_F = max |F·s_G| over everything; F̃ = F·s_G / s_F
  const op::Source f{p.colors, p.C * p.N, p.CH, nullptr, l.g_scale};
  GSR_CUDA_TRY(op::absmax_scale(f, /*per_channel=*/false, l.f_scale, stream));
  GSR_CUDA_TRY(op::convert<Bits>(f, nullptr, l.f_scale, l.CHp, l.f, stream));
  const BwdArgs ba{l.g, l.f, l.g_scale, l.f_scale, l.seed, l.CHp};
  return launch_kernel<KT>(p, io, ba, n_tiles, stream);
}

}  // namespace
}  // namespace gpu

namespace launch {

size_t rasterize_mma_bwd_workspace_bytes(const RasterArgs<float>& p) {
  return gpu::BwdLayout(p, nullptr).total;
}

cudaError_t launch_rasterize_mma_bwd(const RasterBwdArgs<float>& a, RasterKernel kernel,
                                     Workspace ws, cudaStream_t stream) {
  const RasterArgs<float>& p = a.in;
  const int64_t n_tiles = raster_tiles(p);
  const gpu::BwdLayout l(p, ws.ptr);
  if (ws.bytes < l.total) return cudaErrorInvalidValue;
  if (kernel != RasterKernel::kMmaF16 && kernel != RasterKernel::kMmaBF16)
    return cudaErrorInvalidValue;
  if (n_tiles == 0) return cudaSuccess;
  using gpu::MmaBwdTraits;
  GSR_CUDA_TRY(kernel == RasterKernel::kMmaBF16
                   ? gpu::prepare_and_launch<MmaBwdTraits<gpu::BF16>>(p, a.io, l, n_tiles, stream)
                   : gpu::prepare_and_launch<MmaBwdTraits<gpu::F16>>(p, a.io, l, n_tiles, stream));
  // v_backgrounds: sorted T_final·v_render, weighted w_bg·g, summed over each camera's pixels
  if (p.backgrounds == nullptr || p.C * p.CH == 0) return cudaSuccess;
  GSR_LAUNCH(static_cast<unsigned>(p.C * p.CH), gpu::operands::kThreads, 0,
                              stream, gpu::v_backgrounds_kernel)(p, a.io);
  return cudaGetLastError();
}

}  // namespace launch
}  // namespace gsrender
