// CPU forward rasterizer in the matrix formulation (DESIGN §4): per sub-tile and batch of packed
// Gaussians, build W (P×K) with the exact transmittance scan, then OUT += W·F as a blocked GEMM.
// impl = scalar keeps the one-pixel-at-a-time 3DGS loop as the in-house baseline.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "gemm.h"
#include "isa.h"
#include "raster_tile.h"

namespace gsrender {
namespace cpu {
namespace {

// Per-thread scratch, reused across tiles.
template <typename T>
struct FwdScratch {
  std::vector<TileGaussian<T>> gs;
  std::vector<T> out;  // [kSubPixels, CH]
  T alpha[kSubPixels * kBatch];
  T w[kSubPixels * kBatch];
  Batch<T> batch;
  int64_t listed = 0, computed = 0, useful = 0;
};

// Pixel state across batches of one sub-tile.
template <typename T>
struct PixelState {
  T trans[kSubPixels];  // sorted: transmittance; weighted: Π(1-α)
  T wsum[kSubPixels];   // weighted: Σ α·φ
  int32_t last[kSubPixels];
  bool active[kSubPixels];
  int n_active;
};

// W for one batch (sorted mode): the exclusive transmittance scan along k with 3DGS's early
// stop, sequential per pixel exactly as sequential compositing.
template <typename T>
void batch_weights_sorted(const Batch<T>& bt, const T* alpha, int32_t list_start,
                          PixelState<T>& ps, T* w, int64_t& useful) {
  for (int p = 0; p < kSubPixels; ++p) {
    T* wp = w + p * kBatch;
    std::fill(wp, wp + bt.n, T(0));
    if (!ps.active[p]) continue;
    const T* ap = alpha + p * kBatch;
    T tr = ps.trans[p];
    for (int k = 0; k < bt.n; ++k) {
      if (ap[k] == T(0)) continue;
      const T next = tr * (T(1) - ap[k]);
      if (next < T(kTransmittanceMin)) {
        ps.active[p] = false;
        --ps.n_active;
        break;
      }
      wp[k] = ap[k] * tr;
      tr = next;
      ps.last[p] = list_start + bt.pos[k] + 1;
      ++useful;
    }
    ps.trans[p] = tr;
  }
}

// W for one batch (weighted mode): w = α·φ(z); no order, no stop.
template <typename T>
void batch_weights_weighted(const Batch<T>& bt, const T* alpha, PixelState<T>& ps, T* w,
                            int64_t& useful) {
  for (int p = 0; p < kSubPixels; ++p) {
    T* wp = w + p * kBatch;
    std::fill(wp, wp + bt.n, T(0));
    if (!ps.active[p]) continue;
    const T* ap = alpha + p * kBatch;
    for (int k = 0; k < bt.n; ++k) {
      if (ap[k] == T(0)) continue;
      wp[k] = ap[k] * bt.phi[k];
      ps.wsum[p] += wp[k];
      ps.trans[p] *= T(1) - ap[k];
      ++useful;
    }
  }
}

template <typename T>
void render_subtile(const RasterArgs<T>& a, int64_t cam, int32_t start, int32_t end, int ox,
                    int oy, const SubTile& st, FwdScratch<T>& s, const FwdOut<T>& o) {
  const int64_t CH = a.CH;
  const bool sorted = a.sorted;
  PixelState<T> ps;
  ps.n_active = 0;
  for (int p = 0; p < kSubPixels; ++p) {
    ps.trans[p] = T(1), ps.wsum[p] = T(0), ps.last[p] = start;
    ps.active[p] = st.valid(p, ox, oy);
    ps.n_active += ps.active[p];
  }
  std::fill(s.out.begin(), s.out.begin() + kSubPixels * CH, T(0));
  const int32_t n = end - start;
  Batch<T>& bt = s.batch;
  bt.n = 0;
  auto flush = [&] {
    if (bt.n == 0) return;
    s.computed += int64_t(bt.n) * ps.n_active;
    bt.seal();
    batch_alpha(bt, ox, oy, s.alpha);
    if (sorted)
      batch_weights_sorted(bt, s.alpha, start, ps, s.w, s.useful);
    else
      batch_weights_weighted(bt, s.alpha, ps, s.w, s.useful);
    accumulate_rows<T>(s.out.data(), CH, s.w, kBatch, bt.rows, kSubPixels, bt.n, CH);
    bt.n = 0;
  };
  int32_t i = 0;
  for (; i < n && ps.n_active > 0; ++i) {
    const TileGaussian<T>& g = s.gs[i];
    if (!g.box.meets(st.x0, st.y0, st.x1, st.y1)) continue;  // packing
    bt.push(g, i, a.colors + static_cast<int64_t>(g.id) * CH);  // lazy fetch: packed rows only
    if (bt.n == kBatch) flush();
  }
  flush();
  s.listed += int64_t(i) * st.n_valid;

  const T* bg = a.backgrounds ? a.backgrounds + cam * CH : nullptr;
  for (int p = 0; p < kSubPixels; ++p) {
    if (!st.valid(p, ox, oy)) continue;
    const int x = ox + p % kSubW, y = oy + p / kSubW;
    const int64_t pix = (cam * a.height + y) * a.width + x;
    T* dst = o.render + pix * CH;
    const T* acc = s.out.data() + p * CH;
    const T tr = ps.trans[p];
    if (sorted) {
      for (int64_t c = 0; c < CH; ++c) dst[c] = acc[c] + (bg ? tr * bg[c] : T(0));
      o.aux[pix] = tr;
      o.last_ids[pix] = ps.last[p];
    } else {
      const T denom = ps.wsum[p] + a.w_bg;
      for (int64_t c = 0; c < CH; ++c) dst[c] = (acc[c] + (bg ? a.w_bg * bg[c] : T(0))) / denom;
      o.aux[pix] = denom;
      o.last_ids[pix] = end;
    }
    o.alphas[pix] = T(1) - tr;
  }
}

// The 3DGS/gsplat-style baseline: one pixel at a time over the whole tile list, channel loop
// per Gaussian. Sorted mode only (weighted uses the matrix path).
template <typename T>
void render_tile_scalar(const RasterArgs<T>& a, int64_t cam, int tx, int ty, int32_t start,
                        int32_t end, const std::vector<TileGaussian<T>>& gs,
                        const FwdOut<T>& o) {
  const int64_t CH = a.CH;
  const T* bg = a.backgrounds ? a.backgrounds + cam * CH : nullptr;
  const int x0 = tx * a.tile_size, y0 = ty * a.tile_size;
  for (int y = y0; y < std::min(y0 + a.tile_size, a.height); ++y)
    for (int x = x0; x < std::min(x0 + a.tile_size, a.width); ++x) {
      const int64_t pix = (cam * a.height + y) * a.width + x;
      T* dst = o.render + pix * CH;
      std::fill(dst, dst + CH, T(0));
      T tr = 1;
      int32_t last = start;
      const T px = x + T(0.5), py = y + T(0.5);
      for (int32_t i = 0; i < end - start; ++i) {
        const TileGaussian<T>& g = gs[i];
        const T alpha =
            pair_alpha<T>(g.opacity, gaussian_sigma<T>(g.a, g.b, g.c, g.mx - px, g.my - py));
        if (alpha == T(0)) continue;
        const T next = tr * (T(1) - alpha);
        if (next < T(kTransmittanceMin)) break;
        const T wgt = alpha * tr;
        const T* f = a.colors + static_cast<int64_t>(g.id) * CH;
        for (int64_t c = 0; c < CH; ++c) dst[c] += wgt * f[c];
        tr = next;
        last = start + i + 1;
      }
      if (bg)
        for (int64_t c = 0; c < CH; ++c) dst[c] += tr * bg[c];
      o.alphas[pix] = T(1) - tr;
      o.aux[pix] = tr;
      o.last_ids[pix] = last;
    }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> rasterize_fwd_cpu(
    const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& opacities,
    const at::Tensor& colors, const at::Tensor& depths,
    const c10::optional<at::Tensor>& backgrounds, const at::Tensor& tile_offsets,
    const at::Tensor& flatten_ids, int64_t width, int64_t height, int64_t tile_size, int64_t mode,
    at::ArrayRef<double> weight_params, int64_t impl, bool /*deterministic: backward only*/) {
  const RasterInputs in =
      check_raster_inputs(means2d, conics, opacities, colors, depths, backgrounds, tile_offsets,
                          flatten_ids, width, height, tile_size, mode, weight_params);
  check_raster_impl(impl);
  TORCH_CHECK_VALUE(impl != kImplScalar || mode == 0, "the scalar impl renders sorted mode only");
  check_binning(in);
  const int64_t C = means2d.size(0), CH = colors.size(2);
  const auto [render, alphas, last_ids, aux, stats] =
      empty_raster_outputs(C, height, width, CH, means2d.options());
  AT_DISPATCH_FLOATING_TYPES(means2d.scalar_type(), "rasterize_fwd_cpu", [&] {
    using T = scalar_t;
    const RasterArgs<T> a = make_raster_args<T>(in, width, height, tile_size, mode, weight_params);
    const FwdOut<T> o{render.data_ptr<T>(), alphas.data_ptr<T>(), last_ids.data_ptr<int32_t>(),
                      aux.data_ptr<T>(), stats.data_ptr<int64_t>()};
    int64_t* st = o.stats;
    const int64_t tiles_per_cam = int64_t(a.TH) * a.TW;
    cpu::parallel_for(0, C * tiles_per_cam, 1, [&](int64_t begin, int64_t end) {
      FwdScratch<T> s;
      s.out.resize(kSubPixels * CH);
      for (int64_t t = begin; t < end; ++t) {
        const int64_t cam = t / tiles_per_cam;
        const int ty = (t % tiles_per_cam) / a.TW, tx = t % a.TW;
        const int32_t start = a.tile_start(t), stop = a.tile_end(t);
        gather_tile(a, start, stop, s.gs);
        s.listed = s.computed = s.useful = 0;
        if (impl == kImplScalar) {
          render_tile_scalar(a, cam, tx, ty, start, stop, s.gs, o);
          continue;
        }
        for_each_subtile(tx, ty, a.tile_size, a.width, a.height,
                         [&](int ox, int oy, const SubTile& sub) {
                           render_subtile(a, cam, start, stop, ox, oy, sub, s, o);
                         });
        atomic_add<int64_t>(st + 3 * cam + 0, s.listed);
        atomic_add<int64_t>(st + 3 * cam + 1, s.computed);
        atomic_add<int64_t>(st + 3 * cam + 2, s.useful);
      }
    });
  });
  return {render, alphas, last_ids, aux, stats};
}

}  // namespace
}  // namespace cpu

TORCH_LIBRARY_IMPL(gsrender, CPU, m) { m.impl("rasterize_fwd", &cpu::rasterize_fwd_cpu); }

}  // namespace gsrender
