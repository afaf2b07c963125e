// CPU backward rasterizer (DESIGN §4 backward): per sub-tile, recompute the forward's α and
// transmittance for the packed list, then walk batches back to front:
//   dW = G·Fᵀ and dF += Wᵀ·G as blocked GEMMs, dA from the carried suffix sums, and the
// elementwise chain to the 2D parameters. Per-tile partial gradients are reduced locally and
// added to the global buffers once per (tile, Gaussian), atomically; with deterministic=true
// they go to per-entry rows instead and a fixed-order reduction sums them (gsrender/det_reduce.h),
// so the result is the same bit for bit whatever the thread count.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "gemm.h"
#include "gsrender/det_reduce.h"
#include "isa.h"
#include "raster_tile.h"

namespace gsrender {
namespace cpu {
namespace {

template <typename T>
struct BwdScratch {
  std::vector<TileGaussian<T>> gs;
  std::vector<int32_t> packed;
  std::vector<T> alpha, trans;      // [kSubPixels, n_packed] recomputed α and T before it
  std::vector<T> g;                 // [kSubPixels, CH] upstream gradient (scaled in weighted)
  std::vector<T> w, dw;             // [kSubPixels, kBatch]
  std::vector<const T*> rows;       // [kBatch]
  std::vector<T*> drows;            // [kBatch]
  std::vector<AlphaGrad<T>> grad2d; // [n] per tile-list entry
  std::vector<T> dcolor;            // [n, CH]
  std::vector<T> ddepth;            // [n]
  std::vector<char> touched;        // [n]
  std::vector<T> dbg;               // [CH]
  Batch<T> batch;
  T block[kSubPixels * kBatch];     // one batch's α
};

template <typename T>
void backward_subtile(const RasterArgs<T>& a, int64_t cam, int32_t start, int32_t end, int ox,
                      int oy, const SubTile& st, BwdScratch<T>& s, const RasterBwdIO<T>& io) {
  const int64_t CH = a.CH;
  const bool sorted = a.sorted;
  const T* bg = a.backgrounds ? a.backgrounds + cam * CH : nullptr;
  int64_t pix[kSubPixels];
  int32_t last[kSubPixels];
  T t_final[kSubPixels], acc[kSubPixels], g_out[kSubPixels], v_alpha[kSubPixels];
  int32_t limit = 0;
  bool any = false;
  for (int p = 0; p < kSubPixels; ++p) {
    T* gp = s.g.data() + p * CH;
    pix[p] = -1, last[p] = 0, t_final[p] = 0, acc[p] = 0, g_out[p] = 0, v_alpha[p] = 0;
    std::fill(gp, gp + CH, T(0));
    if (!st.valid(p, ox, oy)) continue;
    const int x = ox + p % kSubW, y = oy + p / kSubW;
    pix[p] = (cam * a.height + y) * a.width + x;
    last[p] = io.last_ids[pix[p]] - start;
    limit = std::max(limit, last[p]);
    v_alpha[p] = io.v_alphas[pix[p]];
    const T* vr = io.v_render + pix[p] * CH;
    if (sorted) {
      t_final[p] = io.aux[pix[p]];
      T g_bg = 0;
      for (int64_t c = 0; c < CH; ++c) gp[c] = vr[c], g_bg += bg ? vr[c] * bg[c] : T(0);
      // suffix-sum seed: the background and alpha-output terms of dA (DESIGN §4)
      acc[p] = t_final[p] * (g_bg - v_alpha[p]);
      for (int64_t c = 0; c < CH; ++c) s.dbg[c] += t_final[p] * vr[c];
    } else {
      t_final[p] = T(1) - io.alphas[pix[p]];
      const T inv = T(1) / io.aux[pix[p]];
      const T* out = io.render + pix[p] * CH;
      for (int64_t c = 0; c < CH; ++c) gp[c] = vr[c] * inv, g_out[p] += gp[c] * out[c];
      for (int64_t c = 0; c < CH; ++c) s.dbg[c] += a.w_bg * gp[c];
    }
    any = true;
  }
  if (!any) return;
  pack_subtile(s.gs, sorted ? limit : end - start, st, s.packed);
  const int np = static_cast<int>(s.packed.size());
  if (np == 0) return;

  // α (and, sorted, the transmittance before each Gaussian) for every packed pair, recomputed
  // front to back exactly as the forward did.
  s.alpha.assign(size_t(kSubPixels) * np, T(0));
  s.trans.assign(size_t(kSubPixels) * np, T(0));
  T tr[kSubPixels];
  bool live[kSubPixels];
  for (int p = 0; p < kSubPixels; ++p) tr[p] = T(1), live[p] = pix[p] >= 0;
  for (int k0 = 0; k0 < np; k0 += kBatch) {
    Batch<T>& bt = s.batch;
    bt.n = 0;
    for (int k = k0; k < std::min(np, k0 + kBatch); ++k) bt.push(s.gs[s.packed[k]], s.packed[k], nullptr);
    bt.seal();
    batch_alpha(bt, ox, oy, s.block);
    for (int p = 0; p < kSubPixels; ++p) {
      for (int k = 0; k < bt.n && live[p]; ++k) {
        if (sorted && bt.pos[k] >= last[p]) {
          live[p] = false;
          break;
        }
        const T al = s.block[p * kBatch + k];
        if (al == T(0)) continue;
        s.alpha[size_t(p) * np + k0 + k] = al;
        s.trans[size_t(p) * np + k0 + k] = tr[p];
        tr[p] *= T(1) - al;
      }
    }
  }

  // Batches back to front (the order matters only for the sorted suffix sums).
  for (int k1 = np; k1 > 0; k1 -= kBatch) {
    const int k0 = std::max(0, k1 - kBatch), nb = k1 - k0;
    for (int k = 0; k < nb; ++k) {
      const int32_t i = s.packed[k0 + k];
      s.rows[k] = a.colors + static_cast<int64_t>(s.gs[i].id) * CH;
      s.drows[k] = s.dcolor.data() + static_cast<int64_t>(i) * CH;
      s.touched[i] = 1;
    }
    for (int p = 0; p < kSubPixels; ++p)
      for (int k = 0; k < nb; ++k) {
        const size_t e = size_t(p) * np + k0 + k;
        const T al = s.alpha[e];
        s.w[p * kBatch + k] = sorted ? al * s.trans[e] : al * s.gs[s.packed[k0 + k]].phi;
      }
    dot_rows<T>(s.dw.data(), kBatch, s.g.data(), CH, s.rows.data(), kSubPixels, nb, CH);
    accumulate_transposed<T>(s.drows.data(), s.w.data(), kBatch, s.g.data(), CH, kSubPixels, nb,
                             CH);
    for (int p = 0; p < kSubPixels; ++p) {
      if (pix[p] < 0) continue;
      const T px = ox + p % kSubW + T(0.5), py = oy + p / kSubW + T(0.5);
      for (int k = nb - 1; k >= 0; --k) {
        const size_t e = size_t(p) * np + k0 + k;
        const T al = s.alpha[e];
        if (al == T(0)) continue;
        const int32_t i = s.packed[k0 + k];
        const TileGaussian<T>& g = s.gs[i];
        const T wk = s.w[p * kBatch + k], dwk = s.dw[p * kBatch + k];
        T v_al;
        if (sorted) {
          v_al = s.trans[e] * dwk - acc[p] / (T(1) - al);
          acc[p] += wk * dwk;
        } else {
          const T dw_net = dwk - g_out[p];  // d(N/S)/dw = (f − OUT)/S
          v_al = dw_net * g.phi + v_alpha[p] * t_final[p] / (T(1) - al);
          s.ddepth[i] += dw_net * al *
                         depth_weight_dz<T>(a.depths[g.id], g.phi, a.sigma_w, a.beta);
        }
        s.grad2d[i].add(v_al, al, g.opacity, g.a, g.b, g.c, g.mx - px, g.my - py);
      }
    }
  }
}

// One (camera, tile) task: the tile's per-entry sums in s.grad2d / s.dcolor / s.ddepth / s.touched
// and its v_backgrounds share added to s.dbg.
template <typename T>
void backward_tile(const RasterArgs<T>& a, const RasterBwdIO<T>& io, int64_t t,
                   BwdScratch<T>& s) {
  const int64_t tiles_per_cam = int64_t(a.TH) * a.TW;
  const int64_t cam = t / tiles_per_cam;
  const int ty = (t % tiles_per_cam) / a.TW, tx = t % a.TW;
  const int32_t start = a.tile_start(t), stop = a.tile_end(t);
  const int32_t n = stop - start;
  gather_tile(a, start, stop, s.gs);
  s.grad2d.assign(n, AlphaGrad<T>());
  s.dcolor.assign(size_t(n) * a.CH, T(0));
  s.ddepth.assign(n, T(0));
  s.touched.assign(n, 0);
  for_each_subtile(tx, ty, a.tile_size, a.width, a.height,
                   [&](int ox, int oy, const SubTile& sub) {
                     backward_subtile(a, cam, start, stop, ox, oy, sub, s, io);
                   });
}

template <typename T>
BwdScratch<T> make_scratch(int64_t CH) {
  BwdScratch<T> s;
  s.g.resize(kSubPixels * CH);
  s.w.resize(kSubPixels * kBatch);
  s.dw.resize(kSubPixels * kBatch);
  s.rows.resize(kBatch);
  s.drows.resize(kBatch);
  s.dbg.assign(CH, T(0));
  return s;
}

// The default reduction: each tile adds its sums to the outputs with one atomic per (entry,
// field), v_backgrounds once per thread and camera.
template <typename T>
void backward_atomic(const RasterArgs<T>& a, const RasterBwdIO<T>& io) {
  const int64_t CH = a.CH, tiles_per_cam = int64_t(a.TH) * a.TW;
  cpu::parallel_for(0, a.C * tiles_per_cam, 1, [&](int64_t begin, int64_t end) {
    BwdScratch<T> s = make_scratch<T>(CH);
    int64_t dbg_cam = begin / std::max<int64_t>(tiles_per_cam, 1);
    auto flush_dbg = [&] {
      for (int64_t c = 0; c < CH; ++c)
        if (s.dbg[c] != T(0)) atomic_add<T>(io.v_backgrounds + dbg_cam * CH + c, s.dbg[c]);
      std::fill(s.dbg.begin(), s.dbg.end(), T(0));
    };
    for (int64_t t = begin; t < end; ++t) {
      const int64_t cam = t / tiles_per_cam;
      if (cam != dbg_cam) flush_dbg(), dbg_cam = cam;
      backward_tile(a, io, t, s);
      for (size_t i = 0; i < s.gs.size(); ++i) {
        if (!s.touched[i]) continue;
        const int64_t id = s.gs[i].id;
        const AlphaGrad<T>& g = s.grad2d[i];
        atomic_add<T>(io.v_means2d + 2 * id, g.v_mean_x);
        atomic_add<T>(io.v_means2d + 2 * id + 1, g.v_mean_y);
        atomic_add<T>(io.v_conics + 3 * id, g.v_a);
        atomic_add<T>(io.v_conics + 3 * id + 1, g.v_b);
        atomic_add<T>(io.v_conics + 3 * id + 2, g.v_c);
        atomic_add<T>(io.v_opacities + id, g.v_opacity);
        if (s.ddepth[i] != T(0)) atomic_add<T>(io.v_depths + id, s.ddepth[i]);
        const T* d = s.dcolor.data() + i * CH;
        T* dst = io.v_colors + id * CH;
        for (int64_t c = 0; c < CH; ++c)
          if (d[c] != T(0)) atomic_add<T>(dst + c, d[c]);
      }
    }
    flush_dbg();
  });
}

// deterministic=true (gsrender/det_reduce.h): per pass, every tile writes its entries' rows of
// part (and, first pass, its v_backgrounds row), then each Gaussian's rows are summed in entry
// order. Untouched entries keep part's zeros.
template <typename T>
void backward_deterministic(const RasterArgs<T>& a, const RasterBwdIO<T>& io,
                            const at::Tensor& flatten_ids, bool has_bg) {
  const int64_t CH = a.CH, n_tiles = a.C * int64_t(a.TH) * a.TW, G = a.C * a.N;
  const DetPlan plan = make_det_plan(flatten_ids, G, CH, sizeof(T));
  const int64_t* order = plan.order.data_ptr<int64_t>();
  const int64_t* seg = plan.seg.data_ptr<int64_t>();
  const auto opts = at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value);
  at::Tensor bg_part = at::zeros({has_bg ? n_tiles : 0, CH}, opts);  // [tiles, CH]
  T* bgp = bg_part.data_ptr<T>();
  const DetOut<T> out{io.v_means2d, io.v_conics, io.v_opacities, io.v_colors, io.v_depths, CH};
  for (int64_t c0 = 0; c0 < std::max<int64_t>(CH, 1); c0 += plan.chunk) {
    const DetPass ps = plan.pass(c0, CH);
    at::Tensor part_t = at::zeros({a.M, ps.stride}, opts);  // [M, kDetFields + nc]
    T* part = part_t.data_ptr<T>();
    cpu::parallel_for(0, n_tiles, 1, [&](int64_t begin, int64_t end) {
      BwdScratch<T> s = make_scratch<T>(CH);
      for (int64_t t = begin; t < end; ++t) {
        backward_tile(a, io, t, s);
        if (has_bg && ps.first)
          for (int64_t c = 0; c < CH; ++c) bgp[t * CH + c] = s.dbg[c];
        std::fill(s.dbg.begin(), s.dbg.end(), T(0));
        const int64_t start = a.tile_start(t);
        for (size_t i = 0; i < s.gs.size(); ++i) {
          if (!s.touched[i]) continue;
          T* row = part + (start + int64_t(i)) * ps.stride;
          const AlphaGrad<T>& g = s.grad2d[i];
          row[kDetMeanX] = g.v_mean_x, row[kDetMeanY] = g.v_mean_y;
          row[kDetConicA] = g.v_a, row[kDetConicB] = g.v_b, row[kDetConicC] = g.v_c;
          row[kDetOpacity] = g.v_opacity, row[kDetDepth] = s.ddepth[i];
          const T* d = s.dcolor.data() + i * CH + ps.c0;
          std::copy(d, d + ps.nc, row + kDetFields);
        }
      }
    });
    cpu::parallel_for(0, G, 256, [&](int64_t g0, int64_t g1) {
      for (int64_t g = g0; g < g1; ++g)
        for (int64_t f = 0; f < ps.stride; ++f) det_reduce_one(out, ps, part, order, seg, g, f);
    });
  }
  if (!has_bg) return;
  const int64_t per_cam = int64_t(a.TH) * a.TW;
  for (int64_t cam = 0; cam < a.C; ++cam)
    for (int64_t c = 0; c < CH; ++c)
      io.v_backgrounds[cam * CH + c] =
          det_column_sum<T>(bgp, CH, nullptr, cam * per_cam, (cam + 1) * per_cam, c);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
rasterize_bwd_cpu(const at::Tensor& means2d, const at::Tensor& conics,
                  const at::Tensor& opacities, const at::Tensor& colors, const at::Tensor& depths,
                  const c10::optional<at::Tensor>& backgrounds, const at::Tensor& tile_offsets,
                  const at::Tensor& flatten_ids, int64_t width, int64_t height, int64_t tile_size,
                  int64_t mode, at::ArrayRef<double> weight_params, const at::Tensor& render,
                  const at::Tensor& alphas, const at::Tensor& last_ids, const at::Tensor& aux,
                  const at::Tensor& v_render, const at::Tensor& v_alphas, int64_t impl,
                  bool deterministic) {
  const RasterInputs in =
      check_raster_inputs(means2d, conics, opacities, colors, depths, backgrounds, tile_offsets,
                          flatten_ids, width, height, tile_size, mode, weight_params);
  check_binning(in);
  const int64_t C = means2d.size(0);
  const auto dt = means2d.scalar_type();
  check_raster_grads(in, width, height, render, alphas, last_ids, aux, v_render, v_alphas);
  check_raster_impl(impl);  // every impl has the same exact fp32/fp64 backward on the CPU
  const auto last_c = last_ids.contiguous();
  {  // each pixel's last_ids must lie inside its own tile's run (the backward indexes by it)
    const int32_t* l = last_c.data_ptr<int32_t>();
    const int32_t* off = in.tile_offsets.data_ptr<int32_t>();
    const int64_t TH = in.tile_offsets.size(1), TW = in.tile_offsets.size(2);
    const int64_t M = flatten_ids.numel();
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < height; ++y)
        for (int64_t x = 0; x < width; ++x) {
          const int64_t t = (c * TH + y / tile_size) * TW + x / tile_size;
          const int64_t start = off[t], end = t + 1 < C * TH * TW ? off[t + 1] : M;
          const int32_t v = l[(c * height + y) * width + x];
          TORCH_CHECK_VALUE(v >= start && v <= end,
                            "last_ids must lie inside each pixel's tile run (as rasterize_fwd "
                            "returns it)");
        }
  }
  const RasterBwdTensors bufs =
      prepare_raster_bwd(in, render, alphas, last_c, aux, v_render, v_alphas);
  const bool has_bg = backgrounds.has_value() && backgrounds->defined();
  AT_DISPATCH_FLOATING_TYPES(dt, "rasterize_bwd_cpu", [&] {
    using T = scalar_t;
    const RasterArgs<T> a = make_raster_args<T>(in, width, height, tile_size, mode, weight_params);
    if (deterministic)
      backward_deterministic<T>(a, bufs.io<T>(), in.flatten_ids, has_bg);
    else
      backward_atomic<T>(a, bufs.io<T>());
  });
  if (!has_bg) bufs.v_backgrounds.zero_();
  return bufs.grads();
}

}  // namespace
}  // namespace cpu

TORCH_LIBRARY_IMPL(gsrender, CPU, m) { m.impl("rasterize_bwd", &cpu::rasterize_bwd_cpu); }

}  // namespace gsrender
