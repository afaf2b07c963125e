// TEST-ONLY op (docs/design.md §5.4): the Tensor Core BACKWARD rasterizer's warp (csrc/cuda/
// rasterize_mma_bwd.cu), emulated on the CPU for one 16×16 tile, sorted or weighted. Per 8×4
// sub-tile one warp walks the tile's list in chunks of 256 packed to its sub-tile, and per group of
// 16 runs the kernel's own lane code (gsrender/mma_fragments.h, gsrender/mma_bwd_fragments.h) on
// 32 emulated lanes: the W recompute with the quad scan, W staged as f16/bf16 words, per channel
// batch Ĝ / F̃ rows staged by the cp.async maps, dW = Ĝ·F̃ᵀ and dF = Wᵀ·Ĝ through emulated
// ldmatrix.x4 / .x4.trans / .x2.trans and mma.m16n8k16, dF unscaled into v_colors, then per pair
// the unscaled dW, the suffix sums (sorted), dα, AlphaGrad and the 8-lane column reduction. The
// operands (Ĝ, F̃, scales, G·OUT) come from gsrender/mma_bwd_operands.h, as in the launcher.
// Atomics become ordered float additions (the kernel's order is unspecified anyway).
#include <ATen/ATen.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "gsrender/mma_bwd_fragments.h"
#include "gsrender/mma_bwd_operands.h"
#include "mma_emulation.h"
#include "raster_tile.h"
#include "warp_emulator.h"

namespace gsrender {
namespace emu {
namespace {

constexpr int kChunk = 256;  // list entries staged per chunk (one per thread of the block)

struct BwdTile {
  const std::vector<cpu::TileGaussian<float>>* gs;
  const float *g, *f, *g_scale, *gout, *alphas, *aux, *v_alphas;  // operands decoded to float
  int64_t CH, CHp;
  float s_f, sigma_w, beta;
  const float* depths;  // weighted mode's z per Gaussian, else nullptr
  int width, height;
  bool bf16, quantize;  // quantize: W through f16/bf16 words (else f32 operands)
  // outputs, indexed by list position
  float *v_means2d, *v_conics, *v_opacities, *v_colors, *v_depths;
};

// W of one lane row as the kernel stages it (w_stage_words), decoded back to float.
void stage_w_row(const BwdTile& k, const float (&w)[4], float* row, int t) {
  if (!k.quantize) {
    for (int j = 0; j < 4; ++j) row[mma::lane_col(t, j)] = w[j];  // lane_col reads only t = lane&3
    return;
  }
  uint32_t lo, hi;
  if (k.bf16)
    mma::w_stage_words<true>(w, lo, hi);
  else
    mma::w_stage_words<false>(w, lo, hi);
  const uint32_t words[2] = {lo, hi};
  for (int q = 0; q < 2; ++q)  // word q·4 + t holds halves 2(q·4 + t), +1
    for (int e = 0; e < 2; ++e) {
      const uint16_t bits = static_cast<uint16_t>(words[q] >> (16 * e));
      row[2 * (4 * q + t) + e] =
          k.bf16 ? mma::bf16_bits_to_float(bits) : mma::half_bits_to_float(bits);
    }
}

template <int R>
void load(const float* smem, int stride, const mma::SmemAt (&at)[kLanes], bool trans,
          float (&out)[kLanes][2 * R]) {
  const float* rows[kLanes];
  for (int l = 0; l < kLanes; ++l) rows[l] = smem + at[l].row * stride + at[l].col;
  ldmatrix<R>(rows, trans, out);
}

// One warp on the sub-tile at (ox, oy) of the image (the kernel's lane_inside: inside the image).
void backward_subtile_warp(const BwdTile& k, int ox, int oy, bool sorted) {
  const std::vector<cpu::TileGaussian<float>>& gs = *k.gs;
  const int32_t G = static_cast<int32_t>(gs.size());
  constexpr int S = mma::kBwdStride;
  Lanes<int> t;
  for (int l = 0; l < kLanes; ++l) t[l] = mma::lane_quad(l);
  Lanes<float> trans[2][2], run_s[2][2], t_final[2][2], v_ao[2][2], gnet[2][2];
  Lanes<bool> done[2][2];
  Lanes<int> last[2][2];
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < kLanes; ++l) {
        const int x = ox + mma::lane_px(l), y = oy + mma::lane_py(b, h);
        const bool in = x < k.width && y < k.height;
        const int64_t pix = in ? int64_t(y) * k.width + x : 0;
        done[b][h][l] = !in;
        trans[b][h][l] = 1.0f, last[b][h][l] = 0;
        v_ao[b][h][l] = in ? k.v_alphas[pix] : 0.0f;
        if (sorted) {
          t_final[b][h][l] = in ? k.aux[pix] : 0.0f;
          run_s[b][h][l] = in ? k.gout[pix] - t_final[b][h][l] * v_ao[b][h][l] : 0.0f;
          gnet[b][h][l] = 0.0f;
        } else {
          t_final[b][h][l] = in ? 1.0f - k.alphas[pix] : 0.0f;
          gnet[b][h][l] = in ? k.gout[pix] : 0.0f;
          run_s[b][h][l] = 0.0f;
        }
      }
  auto warp_done = [&] {
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 2; ++h)
        for (int l = 0; l < kLanes; ++l)
          if (!done[b][h][l]) return false;
    return true;
  };
  EmuQuad quad;
  EmuWarp warp;
  std::vector<float> sg(mma::kBwdRows * S), sf(mma::kK * S), sw(mma::kBwdRows * S);
  std::vector<int32_t> packed;

  for (int32_t chunk0 = 0; chunk0 < G; chunk0 += kChunk) {
    if (warp_done()) break;
    const int32_t n = std::min(kChunk, G - chunk0);
    packed.clear();  // the kernel's ballot packing: the chunk's slots meeting the sub-tile
    for (int32_t j = 0; j < n; ++j)
      if (gs[chunk0 + j].box.meets(ox, oy, ox + mma::kSubW - 1, oy + mma::kSubH - 1))
        packed.push_back(j);
    const int count = static_cast<int>(packed.size());
    for (int g0 = 0; g0 < count; g0 += mma::kK) {
      if (warp_done()) break;
      // ---- W of the group (lane_columns + lane_alpha + row_weights, as the kernel)
      mma::LaneGaussians<float> lg[kLanes];
      Lanes<int> pos1[4];
      Lanes<float> phi[4], alpha[2][2][4], w[2][2][4];
      int ids[kLanes][4];  // list position of each lane column (-1: padding)
      for (int l = 0; l < kLanes; ++l) {
        for (int j = 0; j < 4; ++j) {
          const int kk = g0 + mma::lane_col(l, j);
          const bool ok = kk < count;
          const int e = ok ? packed[kk] : 0;
          const cpu::TileGaussian<float>& g = gs[chunk0 + e];
          lg[l].mx[j] = g.mx, lg[l].my[j] = g.my, lg[l].a[j] = g.a, lg[l].b[j] = g.b;
          lg[l].c[j] = g.c, lg[l].opacity[j] = ok ? g.opacity : 0.0f;
          phi[j][l] = g.phi;
          pos1[j][l] = ok ? chunk0 + e + 1 : 0;
          ids[l][j] = ok ? chunk0 + e : -1;
        }
        for (int b = 0; b < 2; ++b) {
          float al[2][4];
          mma::lane_alpha<float>(l, b, ox, oy, lg[l], al);
          for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j) alpha[b][h][j][l] = al[h][j];
        }
      }
      for (int b = 0; b < 2; ++b)
        for (int h = 0; h < 2; ++h) {
          if (sorted) {
            mma::row_weights(alpha[b][h], pos1, t, quad, trans[b][h], done[b][h], last[b][h],
                             w[b][h]);
          } else {
            for (int j = 0; j < 4; ++j)
              for (int l = 0; l < kLanes; ++l) {
                alpha[b][h][j][l] = done[b][h][l] ? 0.0f : alpha[b][h][j][l];
                w[b][h][j][l] = alpha[b][h][j][l] * phi[j][l];
              }
          }
          for (int l = 0; l < kLanes; ++l) {
            const float wl[4] = {w[b][h][0][l], w[b][h][1][l], w[b][h][2][l], w[b][h][3][l]};
            stage_w_row(k, wl, sw.data() + mma::w_stage_row(l, b, h) * S, mma::lane_quad(l));
          }
        }

      // ---- channel batches
      FragC dw[2][2];
      for (auto& blk : dw)
        for (FragC& c : blk)
          for (auto& lane : c.e)
            for (float& v : lane) v = 0.0f;
      for (int64_t c0 = 0; c0 < k.CHp; c0 += mma::kBwdChannels) {
        for (int q = 0; q < 2 * mma::kBwdRows; ++q) {  // Ĝ rows (cp.async, zero-filled when !ok)
          const mma::SmemAt at = mma::g_stage(q);
          const int b = at.row >> 4, rr = at.row & 15;
          const int x = ox + mma::subtile_px(b, rr), y = oy + mma::subtile_py(b, rr);
          const int64_t ch = c0 + at.col;
          const bool ok = x < k.width && y < k.height && ch < k.CHp;
          const int64_t pix = int64_t(y) * k.width + x;
          for (int e = 0; e < 8; ++e)
            sg[at.row * S + at.col + e] = ok ? k.g[pix * k.CHp + ch + e] : 0.0f;
        }
        for (int l = 0; l < kLanes; ++l) {  // F̃ rows of the group
          const mma::SmemAt at = mma::f_stage(l);
          const int64_t ch = c0 + at.col;
          const bool ok = g0 + at.row < count && ch < k.CHp;
          const int64_t id = ok ? gs[chunk0 + packed[g0 + at.row]].id : 0;
          for (int e = 0; e < 8; ++e)
            sf[at.row * S + at.col + e] = ok ? k.f[id * k.CHp + ch + e] : 0.0f;
        }
        mma::SmemAt at[kLanes];
        float regs4[kLanes][8], regs2[kLanes][4];
        for (int l = 0; l < kLanes; ++l) at[l] = mma::dw_b_at(l);
        load<4>(sf.data(), S, at, false, regs4);
        FragB b0, b1;  // F̃ as B: n8 tile 0 = registers 0, 1; tile 1 = registers 2, 3
        for (int l = 0; l < kLanes; ++l)
          for (int i = 0; i < 4; ++i) b0.e[l][i] = regs4[l][i], b1.e[l][i] = regs4[l][4 + i];
        for (int b = 0; b < 2; ++b) {
          for (int l = 0; l < kLanes; ++l) at[l] = mma::dw_a_at(l, b);
          FragA ga;
          load<4>(sg.data(), S, at, false, ga.e);
          mma_m16n8k16(ga, b0, dw[b][0], dw[b][0]);
          mma_m16n8k16(ga, b1, dw[b][1], dw[b][1]);
        }
        for (int nt = 0; nt < 2; ++nt) {
          FragC df;
          for (auto& lane : df.e)
            for (float& v : lane) v = 0.0f;
          for (int b = 0; b < 2; ++b) {
            FragA wa;
            FragB gb;
            for (int l = 0; l < kLanes; ++l) at[l] = mma::df_a_at(l, b);
            load<4>(sw.data(), S, at, true, wa.e);
            for (int l = 0; l < kLanes; ++l) at[l] = mma::df_b_at(l, b, nt);
            load<2>(sg.data(), S, at, true, regs2);
            for (int l = 0; l < kLanes; ++l)
              for (int i = 0; i < 4; ++i) gb.e[l][i] = regs2[l][i];
            mma_m16n8k16(wa, gb, df, df);
          }
          for (int l = 0; l < kLanes; ++l)
            for (int e = 0; e < 4; ++e) {
              const int kk = g0 + mma::c_row(l, e);
              const int64_t ch = c0 + 8 * nt + mma::c_col(l, e);
              if (kk < count && ch < k.CH && df.e[l][e] != 0.0f)
                k.v_colors[int64_t(chunk0 + packed[kk]) * k.CH + ch] += df.e[l][e] * k.g_scale[ch];
            }
        }
      }

      // ---- per pair: dα → the Gaussian's 2D parameters
      AlphaGrad<float> ag[kLanes][4];
      float v_dep[kLanes][4] = {};
      for (int b = 0; b < 2; ++b)
        for (int h = 0; h < 2; ++h) {
          Lanes<float> dwl[2][4], dwp[4], s_after[4];
          for (int nt = 0; nt < 2; ++nt)
            for (int e = 0; e < 4; ++e)
              for (int l = 0; l < kLanes; ++l) dwl[nt][e][l] = dw[b][nt].e[l][e];
          mma::lane_dw(dwl, h, Lanes<float>(k.s_f), dwp);
          for (int j = 0; j < 4; ++j) s_after[j] = 0.0f;
          if (sorted) mma::row_suffix_sums(w[b][h], dwp, t, quad, run_s[b][h], s_after);
          for (int l = 0; l < kLanes; ++l) {
            const float pcx = ox + mma::lane_px(l) + 0.5f, pcy = oy + mma::lane_py(b, h) + 0.5f;
            for (int j = 0; j < 4; ++j) {
              const float al = alpha[b][h][j][l], wv = w[b][h][j][l];
              if (!(wv > 0.0f)) continue;
              float v_al;
              if (sorted) {
                v_al = mma::v_alpha_sorted(wv, al, dwp[j][l], s_after[j][l]);
              } else {
                const float net = dwp[j][l] - gnet[b][h][l];
                v_al = mma::v_alpha_weighted(net, phi[j][l], al, v_ao[b][h][l], t_final[b][h][l]);
                v_dep[l][j] += net * al * depth_weight_dz<float>(k.depths[ids[l][j]], phi[j][l],
                                                                  k.sigma_w, k.beta);
              }
              const mma::LaneGaussians<float>& g = lg[l];
              ag[l][j].add(v_al, al, g.opacity[j], g.a[j], g.b[j], g.c[j], g.mx[j] - pcx,
                           g.my[j] - pcy);
            }
          }
        }
      // column reduction over the 8 lanes sharing t, then lanes 0–3 add (the kernel's atomics)
      for (int j = 0; j < 4; ++j) {
        Lanes<float> v[7];
        for (int l = 0; l < kLanes; ++l) {
          const AlphaGrad<float>& a = ag[l][j];
          const float vals[7] = {a.v_mean_x, a.v_mean_y, a.v_a, a.v_b, a.v_c, a.v_opacity,
                                 v_dep[l][j]};
          for (int q = 0; q < 7; ++q) v[q][l] = vals[q];
        }
        for (int q = 0; q < 7; ++q) v[q] = mma::column_sum(v[q], warp);
        for (int l = 0; l < kLanes; ++l) {
          const int kk = g0 + mma::lane_col(l, j);
          if (mma::lane_group(l) != 0 || kk >= count) continue;
          const int64_t id = chunk0 + packed[kk];
          float* dst[7] = {k.v_means2d + 2 * id, k.v_means2d + 2 * id + 1, k.v_conics + 3 * id,
                           k.v_conics + 3 * id + 1, k.v_conics + 3 * id + 2, k.v_opacities + id,
                           k.v_depths + id};
          for (int q = 0; q < (sorted ? 6 : 7); ++q) *dst[q] += v[q][l];
        }
      }
    }
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> emulate_mma_bwd_tile(
    const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& opacities,
    const at::Tensor& colors, int64_t tile_x, int64_t tile_y, int64_t width, int64_t height,
    const at::Tensor& render, const at::Tensor& alphas, const at::Tensor& aux,
    const at::Tensor& v_render, const at::Tensor& v_alphas, int64_t precision,
    const c10::optional<at::Tensor>& depths, double sigma_w, double beta) {
  check_shape(means2d, "means2d", {-1, 2});
  const int64_t G = means2d.size(0);
  check_shape(conics, "conics", {G, 3});
  check_shape(opacities, "opacities", {G});
  check_shape(colors, "colors", {G, -1});
  const int64_t CH = colors.size(1);
  check_image_size(width, height);
  check_shape(render, "render", {height, width, CH});
  check_shape(v_render, "v_render", {height, width, CH});
  check_shape(alphas, "alphas", {height, width});
  check_shape(aux, "aux", {height, width});
  check_shape(v_alphas, "v_alphas", {height, width});
  for (auto [t, n] : {std::pair{&means2d, "means2d"}, {&conics, "conics"},
                      {&opacities, "opacities"}, {&colors, "colors"}, {&render, "render"},
                      {&alphas, "alphas"}, {&aux, "aux"}, {&v_render, "v_render"},
                      {&v_alphas, "v_alphas"}})
    check_float(*t, n, at::kFloat);
  TORCH_CHECK_VALUE(precision >= 0 && precision <= 2,
                    "precision must be 0 (f32), 1 (f16) or 2 (bf16), got ", precision);
  TORCH_CHECK_VALUE(CH >= 1, "colors: need at least one channel");
  constexpr int ts = 16;  // the kernel's tile
  TORCH_CHECK_VALUE(tile_x >= 0 && tile_y >= 0 && tile_x * ts < width && tile_y * ts < height,
                    "tile_x, tile_y must name a tile inside the image");
  const bool sorted = !(depths.has_value() && depths->defined());
  at::Tensor dep;
  if (!sorted) {
    dep = depths->contiguous();
    check_shape(dep, "depths", {G});
    check_float(dep, "depths", at::kFloat);
  }
  const std::vector<cpu::TileGaussian<float>> gs =
      gather_list(means2d, conics, opacities, sorted ? nullptr : dep.data_ptr<float>(),
                  static_cast<float>(sigma_w), static_cast<float>(beta));

  // the launcher's operands (f32 mode: the same scaling, no rounding)
  const int64_t P = height * width;
  const at::ScalarType dt =
      precision == 2 ? at::kBFloat16 : precision == 1 ? at::kHalf : at::kFloat;
  const mma::BwdOperands ops =
      mma::bwd_operands(v_render.reshape({P, CH}), render.reshape({P, CH}), aux.reshape({P}),
                        colors.contiguous(), sorted, dt);
  const at::Tensor gq = ops.g.to(at::kFloat).contiguous(), fq = ops.f.to(at::kFloat).contiguous();
  const at::Tensor al = alphas.contiguous(), ax = aux.contiguous(), va = v_alphas.contiguous();

  auto opts = means2d.options();
  at::Tensor v_means2d = at::zeros({G, 2}, opts), v_conics = at::zeros({G, 3}, opts);
  at::Tensor v_opacities = at::zeros({G}, opts), v_colors = at::zeros({G, CH}, opts);
  at::Tensor v_depths = at::zeros({G}, opts);
  const BwdTile k{&gs, gq.data_ptr<float>(), fq.data_ptr<float>(), ops.g_scale.data_ptr<float>(),
                  ops.gout.data_ptr<float>(), al.data_ptr<float>(), ax.data_ptr<float>(),
                  va.data_ptr<float>(), CH, ops.CHp, ops.f_scale.item<float>(),
                  static_cast<float>(sigma_w), static_cast<float>(beta),
                  sorted ? nullptr : dep.data_ptr<float>(), static_cast<int>(width),
                  static_cast<int>(height), precision == 2, precision != 0,
                  v_means2d.data_ptr<float>(), v_conics.data_ptr<float>(),
                  v_opacities.data_ptr<float>(), v_colors.data_ptr<float>(),
                  v_depths.data_ptr<float>()};
  for (int warp = 0; warp < 8; ++warp)  // the kernel's warp → sub-tile map
    backward_subtile_warp(k, static_cast<int>(tile_x) * ts + mma::kSubW * (warp & 1),
                          static_cast<int>(tile_y) * ts + mma::kSubH * (warp >> 1), sorted);
  return {v_means2d, v_conics, v_opacities, v_colors, v_depths};
}

}  // namespace emu
}  // namespace gsrender
