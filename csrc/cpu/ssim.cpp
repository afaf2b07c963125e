// CPU kernels of ssim_fwd / ssim_bwd: the SSIM map of the training loss (gsrender.metrics), the
// five Gaussian-window blurs and the per-pixel formula fused in one pass over row bands, and its
// exact gradient. On a CPU, F.conv2d's depthwise blurs plus ~25 elementwise tensor ops took
// about a fifth of a training step; here the blurs are two 11-tap passes whose inner loops
// vectorise, no intermediate map but the five blurred moments is written, and the channel-last
// images are read in place (no whole-image planar copies: a band's rows are gathered once).
//
// Per pixel, with the blurred moments mx = B(x), my = B(y), sxx = B(x²), syy = B(y²), sxy = B(xy)
// (B: the window along W then H, zero padding, the same size — F.conv2d's cross-correlation):
//   S = (2·mx·my + C1)(2·(sxy − mx·my) + C2) / ((mx² + my² + C1)((sxx − mx²) + (syy − my²) + C2))
// The gradient goes through the moments: v_x = Bᵀ(v·∂S/∂mx) + 2x·Bᵀ(v·∂S/∂sxx) + y·Bᵀ(v·∂S/∂sxy),
// v_y likewise, where Bᵀ (the adjoint of a zero-padded correlation) is B with the window reversed.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "gsrender/checks.h"
#include "isa.h"

namespace gsrender {
namespace {

using at::Tensor;

// Rows a task blurs: a band of H, so its rows blurred along W (band + 2r halo) stay in L2.
constexpr int64_t kBandRows = 64;
constexpr int kMoments = 5;  // mx, my, sxx, syy, sxy

// Channel-last images [B, H, W, CH] seen as P = B·CH planes [H, W]: plane p = (b, c).
template <typename T>
struct Planes {
  T* data;
  int64_t H, W, CH;
  T* row(int64_t p, int64_t y) const { return data + ((p / CH * H + y) * W) * CH + p % CH; }
};

template <typename T>
constexpr int64_t kBlock = 64 / sizeof(T);  // outputs a blur keeps in registers: a cache line

// W rounded up to whole blocks: the blur's last block reads (and drops) values past W.
inline int64_t padded_width(int64_t W, int64_t block) { return (W + block - 1) / block * block; }

// The rows [h0, h1) a band [y0, y1) reads: its own and the window's halo inside the plane.
inline std::pair<int64_t, int64_t> band_halo(int64_t y0, int64_t y1, int64_t H, int r) {
  return {std::max<int64_t>(0, y0 - r), std::min<int64_t>(H, y1 + r)};
}

// Scratch of one thread: a zero-padded input row, the band's rows blurred along W (both with a
// block of slack: see weighted_rows), the source rows of one output row, and band-sized buffers
// (up to kBandRows + 2r rows of W) for what the blurs read or write: the forward's x and y rows,
// the backward's four v·∂S/∂(moment) maps and three blurred ones.
constexpr int kBandBuffers = 7;
template <typename T>
struct BlurScratch {
  std::vector<T> padded, wrows;
  std::vector<const T*> srcs;
  std::vector<T> band[kBandBuffers];
  BlurScratch(int64_t W, int r)
      : padded(padded_width(W, kBlock<T>) + 2 * r, T(0)),
        wrows((kBandRows + 2 * r) * W + kBlock<T>),
        srcs(2 * r + 1) {
    for (auto& b : band) b.resize((kBandRows + 2 * r) * W);
  }
};

// out[x] = Σ_i w[i] · src[i][x] for x in [0, W), i in increasing order. A cache line of outputs
// stays in registers across the n taps (one store per output instead of one per tap). The last
// block is a whole one too, its lanes past W dropped (each src[i] is readable up to
// padded_width(W)): no output takes a scalar loop (at W = 494, 14 pixels a row took 7 % of
// the forward's time that way).
template <typename T>
void weighted_rows(const T* const* src, const T* w, int n, int64_t W, T* out) {
  constexpr int64_t kB = kBlock<T>;
  for (int64_t x = 0; x < W; x += kB) {
    T acc[kB] = {};
    for (int i = 0; i < n; ++i) {
      const T wi = w[i];
      const T* s = src[i] + x;
      for (int64_t j = 0; j < kB; ++j) acc[j] += wi * s[j];
    }
    std::copy(acc, acc + std::min(kB, W - x), out + x);
  }
}

// Rows [y0, y1) of one plane [H, W] blurred into out (row y at out[(y − y0)·W]). row(y, dst)
// writes the plane's row y into dst[0, W): the input itself or a function of it (x², v·∂S/∂m).
template <typename T, class Row>
void blur_band(const Row& row, T* out, int64_t H, int64_t W, const T* g, int r, int64_t y0,
               int64_t y1, BlurScratch<T>& s) {
  const auto [h0, h1] = band_halo(y0, y1, H, r);
  for (int k = 0; k <= 2 * r; ++k) s.srcs[k] = s.padded.data() + k;
  for (int64_t y = h0; y < h1; ++y) {  // along W: the padded row's borders stay 0
    row(y, s.padded.data() + r);
    weighted_rows(s.srcs.data(), g, 2 * r + 1, W, s.wrows.data() + (y - h0) * W);
  }
  for (int64_t y = y0; y < y1; ++y) {  // along H: rows outside the plane are 0
    const int64_t t0 = std::max<int64_t>(h0, y - r), t1 = std::min<int64_t>(h1, y + r + 1);
    for (int64_t t = t0; t < t1; ++t) s.srcs[t - t0] = s.wrows.data() + (t - h0) * W;
    weighted_rows(s.srcs.data(), g + (t0 - y + r), static_cast<int>(t1 - t0), W,
                  out + (y - y0) * W);
  }
}

// S and its partial derivatives with respect to the five moments at one pixel (d_var: ∂S/∂sxx,
// which is also ∂S/∂syy).
template <typename T>
struct SsimPixel {
  T s, d_mx, d_my, d_var, d_sxy;
};

template <typename T>
inline SsimPixel<T> ssim_pixel(T mx, T my, T sxx, T syy, T sxy, T c1, T c2) {
  const T a1 = 2 * mx * my + c1, a2 = 2 * (sxy - mx * my) + c2;
  const T b1 = mx * mx + my * my + c1, b2 = (sxx - mx * mx) + (syy - my * my) + c2;
  const T inv = T(1) / (b1 * b2);
  const T s = a1 * a2 * inv;
  const T k = 2 * s * (T(1) / b2 - T(1) / b1);  // ∂S/∂mx through b1 and b2, over mx
  const T d_var = -s / b2;                      // ∂S/∂sxx = ∂S/∂syy
  return {s, 2 * my * (a2 - a1) * inv + mx * k, 2 * mx * (a2 - a1) * inv + my * k, d_var,
          2 * a1 * inv};
}

// Plane-band tasks [0, P·bands) run in parallel, each with its own scratch.
template <typename T, class F>
void for_plane_bands(int64_t P, int64_t H, int64_t W, int r, const F& f) {
  const int64_t bands = (H + kBandRows - 1) / kBandRows;
  cpu::parallel_for(0, P * bands, 1, [&](int64_t begin, int64_t end) {
    BlurScratch<T> scratch(W, r);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t p = task / bands, y0 = task % bands * kBandRows;
      f(p, y0, std::min(H, y0 + kBandRows), scratch);
    }
  });
}

void check_ssim_inputs(const Tensor& x, const Tensor& y, const Tensor& window) {
  check_shape(x, "x", {-1, -1, -1, -1}, "[B, H, W, CH]");
  check_floating(x, "x");
  check_shape(y, "y", x.sizes().vec(), "[B, H, W, CH] (as x)");
  check_like(y, "y", x, "x");
  check_shape(window, "window", {-1}, "[K]");
  check_like(window, "window", x, "x");
  TORCH_CHECK_VALUE(window.size(0) % 2 == 1, "window must have an odd length K, got ",
                    window.size(0));
}

// Plane p's rows [h0, h1) of channel-last images, gathered into dst (row y at (y − h0)·W).
template <typename T>
void gather_rows(const Planes<const T>& a, int64_t p, int64_t h0, int64_t h1, T* dst) {
  for (int64_t y = h0; y < h1; ++y) {
    const T* src = a.row(p, y);
    T* d = dst + (y - h0) * a.W;
    for (int64_t i = 0; i < a.W; ++i) d[i] = src[i * a.CH];
  }
}

// Row functions for blur_band over rows held contiguously from row h0 (row y at (y − h0)·W):
// a buffer's row, or the product of two buffers' rows.
template <typename T>
auto band_row(const T* b, int64_t h0, int64_t W) {
  return [=](int64_t y, T* dst) { std::copy_n(b + (y - h0) * W, W, dst); };
}
template <typename T>
auto band_product_row(const T* a, const T* b, int64_t h0, int64_t W) {
  return [=](int64_t y, T* dst) {
    const T *ra = a + (y - h0) * W, *rb = b + (y - h0) * W;
    for (int64_t i = 0; i < W; ++i) dst[i] = ra[i] * rb[i];
  };
}

// x, y [B, H, W, CH], window [K] (K odd) -> ssim [B, H, W, CH], moments [5, B·CH, H, W]
std::tuple<Tensor, Tensor> ssim_fwd_cpu(const Tensor& x, const Tensor& y, const Tensor& window,
                                        double c1, double c2) {
  check_ssim_inputs(x, y, window);
  const int64_t H = x.size(1), W = x.size(2), CH = x.size(3), P = x.size(0) * CH, HW = H * W;
  const int r = static_cast<int>(window.size(0) / 2);
  const Tensor x_c = x.contiguous(), y_c = y.contiguous(), g_c = window.contiguous();
  Tensor ssim = at::empty(x.sizes(), x.options());
  Tensor moments = at::empty({kMoments, P, H, W}, x.options());
  if (ssim.numel() == 0) return {ssim, moments};
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ssim_fwd_cpu", [&] {
    using T = scalar_t;
    const Planes<const T> xs{x_c.data_ptr<T>(), H, W, CH}, ys{y_c.data_ptr<T>(), H, W, CH};
    const Planes<T> out{ssim.data_ptr<T>(), H, W, CH};
    const T* g = g_c.data_ptr<T>();
    T* mp = moments.data_ptr<T>();
    const T C1 = static_cast<T>(c1), C2 = static_cast<T>(c2);
    for_plane_bands<T>(P, H, W, r, [&](int64_t p, int64_t y0, int64_t y1, BlurScratch<T>& s) {
      T* m[kMoments];
      for (int q = 0; q < kMoments; ++q) m[q] = mp + (q * P + p) * HW + y0 * W;
      // the band's x and y rows (and halo) gathered once for the five blurs (strided reads of
      // the channel-last images, once per blur, were a third of the forward's time)
      const auto [h0, h1] = band_halo(y0, y1, H, r);
      T *bx = s.band[0].data(), *by = s.band[1].data();
      gather_rows(xs, p, h0, h1, bx);
      gather_rows(ys, p, h0, h1, by);
      blur_band(band_row(bx, h0, W), m[0], H, W, g, r, y0, y1, s);
      blur_band(band_row(by, h0, W), m[1], H, W, g, r, y0, y1, s);
      blur_band(band_product_row(bx, bx, h0, W), m[2], H, W, g, r, y0, y1, s);
      blur_band(band_product_row(by, by, h0, W), m[3], H, W, g, r, y0, y1, s);
      blur_band(band_product_row(bx, by, h0, W), m[4], H, W, g, r, y0, y1, s);
      for (int64_t yy = y0; yy < y1; ++yy) {
        T* o = out.row(p, yy);
        for (int64_t i = (yy - y0) * W, xx = 0; xx < W; ++i, ++xx)
          o[xx * CH] = ssim_pixel(m[0][i], m[1][i], m[2][i], m[3][i], m[4][i], C1, C2).s;
      }
    });
  });
  return {ssim, moments};
}

// -> v_x [B, H, W, CH], v_y [B, H, W, CH] (or [0, H, W, CH] when y_grad is false: the target
// of a loss)
std::tuple<Tensor, Tensor> ssim_bwd_cpu(const Tensor& x, const Tensor& y, const Tensor& window,
                                        double c1, double c2, const Tensor& moments,
                                        const Tensor& v_ssim, bool y_grad) {
  check_ssim_inputs(x, y, window);
  const int64_t H = x.size(1), W = x.size(2), CH = x.size(3), P = x.size(0) * CH, HW = H * W;
  check_shape(moments, "moments", {kMoments, P, H, W}, "[5, B*CH, H, W] (ssim_fwd's)");
  check_like(moments, "moments", x, "x");
  check_shape(v_ssim, "v_ssim", x.sizes().vec(), "[B, H, W, CH] (as x)");
  check_like(v_ssim, "v_ssim", x, "x");
  const int r = static_cast<int>(window.size(0) / 2);
  const Tensor x_c = x.contiguous(), y_c = y.contiguous(), m_c = moments.contiguous(),
               v_c = v_ssim.contiguous(), g_rev = window.flip(0).contiguous();
  Tensor v_x = at::empty(x.sizes(), x.options());
  Tensor v_y = at::empty({y_grad ? x.size(0) : 0, H, W, CH}, x.options());
  if (v_x.numel() == 0) return {v_x, v_y};
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ssim_bwd_cpu", [&] {
    using T = scalar_t;
    const Planes<const T> xs{x_c.data_ptr<T>(), H, W, CH}, ys{y_c.data_ptr<T>(), H, W, CH},
        vs{v_c.data_ptr<T>(), H, W, CH};
    const Planes<T> vx{v_x.data_ptr<T>(), H, W, CH},
        vy{y_grad ? v_y.data_ptr<T>() : nullptr, H, W, CH};
    const T *g = g_rev.data_ptr<T>(), *mp = m_c.data_ptr<T>();
    const T C1 = static_cast<T>(c1), C2 = static_cast<T>(c2);
    for_plane_bands<T>(P, H, W, r, [&](int64_t p, int64_t y0, int64_t y1, BlurScratch<T>& s) {
      const T* m[kMoments];
      for (int q = 0; q < kMoments; ++q) m[q] = mp + (q * P + p) * HW;
      // v·∂S/∂(moment) at every pixel the band's blurs read, ssim_pixel once per pixel (once
      // per blur and per halo row before: ~4 times, two fifths of the backward's time)
      const auto [h0, h1] = band_halo(y0, y1, H, r);
      T *t_cross = s.band[0].data(), *t_mean = s.band[1].data(), *t_var = s.band[2].data(),
        *t_mean_y = s.band[3].data();
      for (int64_t yy = h0; yy < h1; ++yy) {
        const T* v = vs.row(p, yy);
        const int64_t o = (yy - h0) * W;
        for (int64_t i = yy * W, xx = 0; xx < W; ++i, ++xx) {
          const SsimPixel<T> d = ssim_pixel(m[0][i], m[1][i], m[2][i], m[3][i], m[4][i], C1, C2);
          const T vv = v[xx * CH];
          t_cross[o + xx] = vv * d.d_sxy, t_mean[o + xx] = vv * d.d_mx, t_var[o + xx] = vv * d.d_var;
          if (y_grad) t_mean_y[o + xx] = vv * d.d_my;
        }
      }
      // v_a = Bᵀ(v·∂S/∂m_a) + 2a·Bᵀ(v·∂S/∂s_aa) + b·Bᵀ(v·∂S/∂s_ab) for a = x or y
      T *b_cross = s.band[4].data(), *b_mean = s.band[5].data(), *b_sq = s.band[6].data();
      auto combine = [&](const Planes<T>& v_a, const Planes<const T>& a, const Planes<const T>& b) {
        for (int64_t yy = y0; yy < y1; ++yy) {
          T* o = v_a.row(p, yy);
          const T *ra = a.row(p, yy), *rb = b.row(p, yy);
          for (int64_t i = (yy - y0) * W, xx = 0; xx < W; ++i, ++xx)
            o[xx * CH] = b_mean[i] + 2 * ra[xx * CH] * b_sq[i] + rb[xx * CH] * b_cross[i];
        }
      };
      blur_band(band_row(t_cross, h0, W), b_cross, H, W, g, r, y0, y1, s);
      blur_band(band_row(t_mean, h0, W), b_mean, H, W, g, r, y0, y1, s);
      blur_band(band_row(t_var, h0, W), b_sq, H, W, g, r, y0, y1, s);
      combine(vx, xs, ys);
      if (!y_grad) return;
      // ∂S/∂syy = ∂S/∂sxx (ssim_pixel's d_var): b_sq serves v_y as it is
      blur_band(band_row(t_mean_y, h0, W), b_mean, H, W, g, r, y0, y1, s);
      combine(vy, ys, xs);
    });
  });
  return {v_x, v_y};
}

}  // namespace
}  // namespace gsrender

TORCH_LIBRARY_IMPL(gsrender, CPU, m) {
  m.impl("ssim_fwd", &gsrender::ssim_fwd_cpu);
  m.impl("ssim_bwd", &gsrender::ssim_bwd_cpu);
}
