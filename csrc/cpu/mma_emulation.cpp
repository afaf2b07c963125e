// TEST-ONLY ops (docs/design.md §5.4): the Tensor Core rasterizer's warp, emulated on the CPU. One tile is
// rendered the way the GPU kernel (csrc/cuda/kernels/rasterize_mma_fwd.cu) does, sorted or
// weighted: per 8×4 sub-tile one warp packs the tile's depth-ordered list to the Gaussians whose
// support box meets it (raster_tile.h's rule), then per batch of 16 every lane evaluates α for its (pixel,
// Gaussian) pairs, builds its W row slices with the quad transmittance scan (or the weighted
// mode's quad sums; gsrender/mma_fragments.h, run on the emulated lanes), packs them into A
// fragments, stages the batch's features as a [Gaussian][channel] block, loads B with (emulated)
// ldmatrix.x2.trans and accumulates OUT += W·F with (emulated) mma.m16n8k16 into f32 fragments.
// Registered in a separate library fragment: these ops are not part of the public op set.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <vector>

#include "mma_emulation.h"
#include "raster_tile.h"
#include "warp_emulator.h"

namespace gsrender {
namespace emu {
namespace {

enum Precision : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

uint16_t to_bits(float v, bool bf16) {
  return bf16 ? mma::float_to_bf16_bits(v) : mma::float_to_half_bits(v);
}

struct TileOut {
  float* render;   // [ts*ts, CH]
  float* trans;    // [ts*ts]
  int32_t* last;   // [ts*ts]
  int tx0, ty0, ts;
};

// One warp rendering one sub-tile (pixel origin ox, oy).
// weighted: the sort-free mode with φ = gs[i].phi and background weight w_bg (else sorted).
void render_subtile_warp(const std::vector<cpu::TileGaussian<float>>& gs, const float* feats,
                         int64_t CH, const float* bg, int ox, int oy, const cpu::SubTile& st,
                         int precision, bool weighted, float w_bg, const TileOut& o) {
  const int NB = static_cast<int>((CH + mma::kN - 1) / mma::kN);  // channel blocks of 8
  const int CHP = NB * mma::kN;
  Lanes<int> t;
  for (int l = 0; l < kLanes; ++l) t[l] = mma::lane_quad(l);
  // Per-lane copies of the state of its 4 pixels (block b, row half h); the quad agrees on them.
  Lanes<float> trans[2][2], wsum[2][2];
  Lanes<bool> done[2][2];
  Lanes<int> last[2][2];
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 2; ++h) {
      trans[b][h] = 1.0f, wsum[b][h] = 0.0f, last[b][h] = 0;
      for (int l = 0; l < kLanes; ++l)
        done[b][h][l] = !(ox + mma::lane_px(l) <= st.x1 && oy + mma::lane_py(b, h) <= st.y1);
    }
  std::vector<FragC> acc(static_cast<size_t>(NB) * 2);
  for (FragC& c : acc)
    for (auto& lane : c.e)
      for (float& v : lane) v = 0.0f;

  std::vector<int32_t> packed;
  cpu::pack_subtile(gs, static_cast<int32_t>(gs.size()), st, packed);
  std::vector<uint16_t> smem_h(static_cast<size_t>(mma::kK) * CHP);  // [16][CHP] f16 / bf16 bits
  std::vector<float> smem_f(static_cast<size_t>(mma::kK) * CHP);     // [16][CHP] f32 operands
  const bool bf16 = precision == kBF16;
  EmuQuad quad;

  for (size_t s0 = 0; s0 < packed.size(); s0 += mma::kK) {
    bool all_done = true;  // the kernel's __all_sync(done) exit
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 2; ++h)
        for (int l = 0; l < kLanes; ++l) all_done = all_done && done[b][h][l];
    if (all_done) break;
    int slot[mma::kK];  // batch slot → position in the tile list, -1 = padding
    for (int k = 0; k < mma::kK; ++k)
      slot[k] = s0 + k < packed.size() ? packed[s0 + k] : -1;

    // α per lane for its 4 columns and 2 × 2 pixels
    Lanes<float> alpha[2][2][4], phi[4];
    Lanes<int> pos1[4];
    for (int l = 0; l < kLanes; ++l) {
      mma::LaneGaussians<float> lg;
      for (int j = 0; j < 4; ++j) {
        const int p = slot[mma::lane_col(l, j)];
        const cpu::TileGaussian<float> z{0, 0, 0, 0, 0, 0, 1, {0, 0, -1, -1}, -1};
        const cpu::TileGaussian<float>& g = p >= 0 ? gs[p] : z;
        lg.mx[j] = g.mx, lg.my[j] = g.my, lg.a[j] = g.a, lg.b[j] = g.b, lg.c[j] = g.c;
        lg.opacity[j] = g.opacity;
        pos1[j][l] = p + 1;
        phi[j][l] = g.phi;
      }
      for (int b = 0; b < 2; ++b) {
        float al[2][4];
        mma::lane_alpha<float>(l, b, ox, oy, lg, al);
        for (int h = 0; h < 2; ++h)
          for (int j = 0; j < 4; ++j) alpha[b][h][j][l] = al[h][j];
      }
    }
    // W rows: the quad scan with the exact early stop, on all lanes in lockstep
    Lanes<float> w[2][2][4];
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 2; ++h) {
        if (!weighted) {
          mma::row_weights(alpha[b][h], pos1, t, quad, trans[b][h], done[b][h], last[b][h],
                           w[b][h]);
          continue;
        }
        for (int j = 0; j < 4; ++j)  // no early stop: done only marks pixels outside the image
          for (int l = 0; l < kLanes; ++l) alpha[b][h][j][l] = done[b][h][l] ? 0.0f : alpha[b][h][j][l];
        mma::row_weights_weighted(alpha[b][h], phi, quad, trans[b][h], wsum[b][h], w[b][h]);
      }
    // A fragments, one per m16 block
    FragA A[2];
    for (int b = 0; b < 2; ++b) {
      uint32_t regs[kLanes][4];
      for (int l = 0; l < kLanes; ++l) {
        float wl[2][4];
        for (int h = 0; h < 2; ++h)
          for (int j = 0; j < 4; ++j) wl[h][j] = w[b][h][j][l];
        if (precision == kF32) {
          for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j) A[b].e[l][mma::a_elem(h, j)] = wl[h][j];
        } else if (bf16) {
          mma::pack_a<true>(wl, regs[l]);
        } else {
          mma::pack_a<false>(wl, regs[l]);
        }
      }
      if (precision != kF32) unpack_regs<4>(regs, bf16, A[b]);
    }
    // stage the batch's features (lazy: packed rows only; padding rows and the tail are 0)
    for (int k = 0; k < mma::kK; ++k)
      for (int ch = 0; ch < CHP; ++ch) {
        const float v = slot[k] >= 0 && ch < CH ? feats[int64_t(gs[slot[k]].id) * CH + ch] : 0.0f;
        smem_f[size_t(k) * CHP + ch] = v;
        smem_h[size_t(k) * CHP + ch] = to_bits(v, bf16);
      }
    for (int nb = 0; nb < NB; ++nb) {
      FragB B;
      if (precision == kF32) {
        for (int l = 0; l < kLanes; ++l)
          for (int i = 0; i < 4; ++i)
            B.e[l][i] = smem_f[size_t(mma::b_row(l, i)) * CHP + nb * mma::kN + mma::b_col(l, i)];
      } else {
        const uint16_t* rows[kLanes];
        for (int l = 0; l < kLanes; ++l)
          rows[l] = smem_h.data() + size_t(mma::ldmatrix_x2_row(l)) * CHP + nb * mma::kN;
        uint32_t regs[kLanes][2];
        ldmatrix_x2_trans(rows, regs);
        unpack_regs<2>(regs, bf16, B);
      }
      for (int b = 0; b < 2; ++b) mma_m16n8k16(A[b], B, acc[nb * 2 + b], acc[nb * 2 + b]);
    }
  }

  // epilogue: C fragments → pixels, plus T_final · background
  for (int b = 0; b < 2; ++b)
    for (int l = 0; l < kLanes; ++l)
      for (int i = 0; i < 4; ++i) {
        const int row = mma::c_row(l, i), h = i >> 1;
        const int px = ox + mma::subtile_px(b, row), py = oy + mma::subtile_py(b, row);
        if (px > st.x1 || py > st.y1) continue;
        const int64_t pix = int64_t(py - o.ty0) * o.ts + (px - o.tx0);
        const float tr = trans[b][h][l];
        for (int nb = 0; nb < NB; ++nb) {
          const int64_t ch = nb * mma::kN + mma::c_col(l, i);
          if (ch >= CH) continue;
          const float v = acc[nb * 2 + b].e[l][i], bgv = bg ? bg[ch] : 0.0f;
          o.render[pix * CH + ch] = weighted ? (v + w_bg * bgv) / (wsum[b][h][l] + w_bg) : v + tr * bgv;
        }
        // every lane of the quad must hold the same pixel state (the reductions' contract)
        const int l0 = l & ~3;
        TORCH_CHECK(trans[b][h][l] == trans[b][h][l0] && last[b][h][l] == last[b][h][l0] &&
                        done[b][h][l] == done[b][h][l0] && wsum[b][h][l] == wsum[b][h][l0],
                    "emulate_mma_tile: quad lanes disagree on a pixel's state");
        o.trans[pix] = tr;
        o.last[pix] = last[b][h][l];
      }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> emulate_mma_tile(
    const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& opacities,
    const at::Tensor& features, int64_t tile_x, int64_t tile_y, int64_t tile_size, int64_t width,
    int64_t height, const c10::optional<at::Tensor>& background, int64_t precision,
    const c10::optional<at::Tensor>& phi, double w_bg) {
  check_shape(means2d, "means2d", {-1, 2});
  const int64_t G = means2d.size(0);
  check_shape(conics, "conics", {G, 3});
  check_shape(opacities, "opacities", {G});
  check_shape(features, "features", {G, -1});
  for (auto [t, n] : {std::pair{&means2d, "means2d"}, {&conics, "conics"},
                      {&opacities, "opacities"}, {&features, "features"}})
    check_float(*t, n, at::kFloat);
  const int64_t CH = features.size(1);
  TORCH_CHECK_VALUE(CH >= 1 && CH <= 4096, "features must have 1 to 4096 channels");
  TORCH_CHECK_VALUE(precision >= 0 && precision <= 2,
                    "precision must be 0 (f32), 1 (f16) or 2 (bf16), got ", precision);
  check_image_size(width, height);
  TORCH_CHECK_VALUE(tile_size > 0 && tile_size <= 256, "tile_size must be in [1, 256]");
  TORCH_CHECK_VALUE(tile_x >= 0 && tile_y >= 0 && tile_x * tile_size < width &&
                        tile_y * tile_size < height,
                    "tile_x, tile_y must name a tile inside the image");
  at::Tensor bg;
  if (background.has_value() && background->defined()) {
    bg = background->contiguous();
    check_shape(bg, "background", {CH});
    check_float(bg, "background", at::kFloat);
  }
  const at::Tensor f = features.contiguous();
  std::vector<cpu::TileGaussian<float>> gs = gather_list(means2d, conics, opacities, nullptr, 0, 1);
  const bool weighted = phi.has_value() && phi->defined();
  if (weighted) {  // the sort-free mode with the caller's φ(z) per Gaussian
    check_shape(*phi, "phi", {G});
    check_float(*phi, "phi", at::kFloat);
    const at::Tensor ph = phi->contiguous();
    for (int64_t i = 0; i < G; ++i) gs[i].phi = ph.data_ptr<float>()[i];
  }

  const int ts = static_cast<int>(tile_size);
  auto render = at::zeros({int64_t(ts) * ts, CH}, means2d.options());
  auto trans = at::ones({int64_t(ts) * ts}, means2d.options());
  auto last = at::zeros({int64_t(ts) * ts}, means2d.options().dtype(at::kInt));
  const TileOut o{render.data_ptr<float>(), trans.data_ptr<float>(), last.data_ptr<int32_t>(),
                  static_cast<int>(tile_x * ts), static_cast<int>(tile_y * ts), ts};
  const float* bgp = bg.defined() ? bg.data_ptr<float>() : nullptr;
  cpu::for_each_subtile(static_cast<int>(tile_x), static_cast<int>(tile_y), ts,
                        static_cast<int>(width), static_cast<int>(height),
                        [&](int ox, int oy, const cpu::SubTile& st) {
                          render_subtile_warp(gs, f.data_ptr<float>(), CH, bgp, ox, oy, st,
                                              static_cast<int>(precision), weighted,
                                              static_cast<float>(w_bg), o);
                        });
  return {render, trans, last};
}

// One m16n8k16 on dense matrices: A [16,16], B [16,8], C [16,8] float32 → D. Operands go through
// the lane fragments (A packed by pack_half2/pack_bf162, B staged [k][n] and loaded by ldmatrix
// .x2.trans) unless precision = 0 (f32 elements placed directly).
at::Tensor emulate_mma(const at::Tensor& A, const at::Tensor& B, const at::Tensor& C,
                       int64_t precision) {
  check_shape(A, "A", {mma::kM, mma::kK});
  check_shape(B, "B", {mma::kK, mma::kN});
  check_shape(C, "C", {mma::kM, mma::kN});
  for (auto [t, n] : {std::pair{&A, "A"}, {&B, "B"}, {&C, "C"}}) check_float(*t, n, at::kFloat);
  TORCH_CHECK_VALUE(precision >= 0 && precision <= 2, "precision must be 0, 1 or 2");
  const at::Tensor a = A.contiguous(), b = B.contiguous(), c = C.contiguous();
  const float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>(), *pc = c.data_ptr<float>();
  const bool bf16 = precision == kBF16;
  FragA fa;
  FragB fb;
  FragC fc, fd;
  uint32_t ra[kLanes][4];
  for (int l = 0; l < kLanes; ++l) {
    for (int i = 0; i < 8; ++i) fa.e[l][i] = pa[mma::a_row(l, i) * mma::kK + mma::a_col(l, i)];
    for (int r = 0; r < 4; ++r)
      ra[l][r] = bf16 ? mma::pack_bf162(fa.e[l][2 * r], fa.e[l][2 * r + 1])
                      : mma::pack_half2(fa.e[l][2 * r], fa.e[l][2 * r + 1]);
    for (int i = 0; i < 4; ++i) {
      fb.e[l][i] = pb[mma::b_row(l, i) * mma::kN + mma::b_col(l, i)];
      fc.e[l][i] = pc[mma::c_row(l, i) * mma::kN + mma::c_col(l, i)];
    }
  }
  if (precision != kF32) {
    unpack_regs<4>(ra, bf16, fa);
    uint16_t smem[mma::kK][mma::kN];
    for (int k = 0; k < mma::kK; ++k)
      for (int n = 0; n < mma::kN; ++n) smem[k][n] = to_bits(pb[k * mma::kN + n], bf16);
    const uint16_t* rows[kLanes];
    for (int l = 0; l < kLanes; ++l) rows[l] = smem[mma::ldmatrix_x2_row(l)];
    uint32_t rb[kLanes][2];
    ldmatrix_x2_trans(rows, rb);
    unpack_regs<2>(rb, bf16, fb);
  }
  mma_m16n8k16(fa, fb, fc, fd);
  auto D = at::empty({mma::kM, mma::kN}, A.options());
  float* pd = D.data_ptr<float>();
  for (int l = 0; l < kLanes; ++l)
    for (int i = 0; i < 4; ++i) pd[mma::c_row(l, i) * mma::kN + mma::c_col(l, i)] = fd.e[l][i];
  return D;
}

// x rounded through the operand format (1: f16, 2: bf16) by the header's host conversion.
at::Tensor emulate_round(const at::Tensor& x, int64_t precision) {
  check_float(x, "x", at::kFloat);
  TORCH_CHECK_VALUE(precision == 1 || precision == 2, "precision must be 1 (f16) or 2 (bf16)");
  const at::Tensor xc = x.contiguous();
  auto out = at::empty_like(xc);
  const float* src = xc.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < xc.numel(); ++i)
    dst[i] = precision == 2 ? mma::bf16_bits_to_float(mma::float_to_bf16_bits(src[i]))
                            : mma::half_bits_to_float(mma::float_to_half_bits(src[i]));
  return out;
}

// The fragment maps as tensors, for the tests to check against the PTX ISA tables:
// [a [32,8,2] (row, col), b [32,4,2] (k, n), c [32,4,2] (row, col), ldmatrix rows [32],
//  sub-tile pixel of (block, row) [2,16,2] (px, py), lane columns [32,4], lane pixels [32,2,2,2]
//  ((block, h) → (px, py))]
std::vector<at::Tensor> mma_fragment_maps() {
  auto i32 = at::TensorOptions().dtype(at::kInt);
  auto a = at::empty({kLanes, 8, 2}, i32), b = at::empty({kLanes, 4, 2}, i32);
  auto c = at::empty({kLanes, 4, 2}, i32), ldm = at::empty({kLanes}, i32);
  auto sub = at::empty({2, 16, 2}, i32), cols = at::empty({kLanes, 4}, i32);
  auto pix = at::empty({kLanes, 2, 2, 2}, i32);
  auto pa = a.accessor<int32_t, 3>(), pb = b.accessor<int32_t, 3>(), pc = c.accessor<int32_t, 3>();
  auto ps = sub.accessor<int32_t, 3>();
  auto pcol = cols.accessor<int32_t, 2>();
  auto pp = pix.accessor<int32_t, 4>();
  for (int l = 0; l < kLanes; ++l) {
    for (int i = 0; i < 8; ++i) pa[l][i][0] = mma::a_row(l, i), pa[l][i][1] = mma::a_col(l, i);
    for (int i = 0; i < 4; ++i) {
      pb[l][i][0] = mma::b_row(l, i), pb[l][i][1] = mma::b_col(l, i);
      pc[l][i][0] = mma::c_row(l, i), pc[l][i][1] = mma::c_col(l, i);
      pcol[l][i] = mma::lane_col(l, i);
    }
    ldm.data_ptr<int32_t>()[l] = mma::ldmatrix_x2_row(l);
    for (int blk = 0; blk < 2; ++blk)
      for (int h = 0; h < 2; ++h) pp[l][blk][h][0] = mma::lane_px(l), pp[l][blk][h][1] = mma::lane_py(blk, h);
  }
  for (int blk = 0; blk < 2; ++blk)
    for (int r = 0; r < 16; ++r) {
      ps[blk][r][0] = mma::subtile_px(blk, r), ps[blk][r][1] = mma::subtile_py(blk, r);
      TORCH_CHECK(mma::subtile_block(ps[blk][r][0], ps[blk][r][1]) == blk &&
                      mma::subtile_row(ps[blk][r][0], ps[blk][r][1]) == r,
                  "subtile_block/subtile_row do not invert subtile_px/subtile_py");
    }
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < kLanes; ++l)
        TORCH_CHECK(mma::a_row(l, mma::a_elem(h, j)) == (l >> 2) + 8 * h &&
                        mma::a_col(l, mma::a_elem(h, j)) == mma::lane_col(l, j),
                    "a_elem disagrees with a_row/a_col");
  return {a, b, c, ldm, sub, cols, pix};
}

}  // namespace

}  // namespace emu

TORCH_LIBRARY_FRAGMENT(gsrender, m) {
  m.def(
      "emulate_mma_tile(Tensor means2d, Tensor conics, Tensor opacities, Tensor features, "
      "int tile_x, int tile_y, int tile_size, int width, int height, Tensor? background, "
      "int precision, Tensor? phi=None, float w_bg=0.) -> (Tensor, Tensor, Tensor)");
  m.def("emulate_mma(Tensor A, Tensor B, Tensor C, int precision) -> Tensor");
  m.def("emulate_round(Tensor x, int precision) -> Tensor");
  m.def("mma_fragment_maps() -> Tensor[]", &emu::mma_fragment_maps);
  m.def(
      "emulate_mma_bwd_tile(Tensor means2d, Tensor conics, Tensor opacities, Tensor colors, "
      "int tile_x, int tile_y, int width, int height, Tensor render, Tensor alphas, Tensor aux, "
      "Tensor v_render, Tensor v_alphas, int precision, Tensor? depths=None, float sigma_w=0., "
      "float beta=1.) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(gsrender, CPU, m) {
  m.impl("emulate_mma_tile", &emu::emulate_mma_tile);
  m.impl("emulate_mma", &emu::emulate_mma);
  m.impl("emulate_round", &emu::emulate_round);
  m.impl("emulate_mma_bwd_tile", &emu::emulate_mma_bwd_tile);
}

}  // namespace gsrender
