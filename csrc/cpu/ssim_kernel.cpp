// CPU kernels of ssim_fwd / ssim_bwd: the SSIM map of the training loss (gsrender.metrics), the
// five Gaussian-window blurs and the per-pixel formula fused in one pass over row bands, and its
// exact gradient. On a CPU, F.conv2d's depthwise blurs plus ~25 elementwise tensor ops took
// about a fifth of a training step; here the blurs are two 11-tap passes whose inner loops
// vectorise, no intermediate map but the five blurred moments is written, and the channel-last
// images are read in place (no planar copies).
//
// Per pixel, with the blurred moments mx = B(x), my = B(y), sxx = B(x²), syy = B(y²), sxy = B(xy)
// (B: the window along W then H, zero padding, the same size — F.conv2d's cross-correlation):
//   S = (2·mx·my + C1)(2·(sxy − mx·my) + C2) / ((mx² + my² + C1)((sxx − mx²) + (syy − my²) + C2))
// The gradient goes through the moments: v_x = Bᵀ(v·∂S/∂mx) + 2x·Bᵀ(v·∂S/∂sxx) + y·Bᵀ(v·∂S/∂sxy),
// v_y likewise, where Bᵀ (the adjoint of a zero-padded correlation) is B with the window reversed.
#include "pixel_contraction.h"  // first: it sets the compile options of all that follows
#include "ssim_kernel.h"

#include <algorithm>
#include <vector>

#include "isa.h"

namespace gsrender {
namespace cpu {
namespace {

// Rows a task blurs: a band of H, so its rows blurred along W (band + 2r halo) stay in L2.
constexpr int64_t kBandRows = 64;

// Channel-last images [B, H, W, CH] seen as P = B·CH planes [H, W]: plane p = (b, c).
template <typename T>
struct Planes {
  T* data;
  int64_t H, W, CH;
  T* row(int64_t p, int64_t y) const { return data + ((p / CH * H + y) * W) * CH + p % CH; }
};

// Scratch of one thread: a zero-padded input row, the band's rows blurred along W, and the
// source rows of one output row.
template <typename T>
struct BlurScratch {
  std::vector<T> padded, wrows;
  std::vector<const T*> srcs;
  BlurScratch(int64_t W, int r)
      : padded(W + 2 * r, T(0)), wrows((kBandRows + 2 * r) * W), srcs(2 * r + 1) {}
};

// out[x] = Σ_i w[i] · src[i][x] for x in [0, W), i in increasing order. A cache line of outputs
// stays in registers across the n taps (one store per output instead of one per tap).
template <typename T>
void weighted_rows(const T* const* src, const T* w, int n, int64_t W, T* out) {
  constexpr int64_t kBlock = 64 / sizeof(T);
  int64_t x = 0;
  for (; x + kBlock <= W; x += kBlock) {
    T acc[kBlock] = {};
    for (int i = 0; i < n; ++i) {
      const T wi = w[i];
      const T* s = src[i] + x;
      for (int64_t j = 0; j < kBlock; ++j) acc[j] += wi * s[j];
    }
    std::copy(acc, acc + kBlock, out + x);
  }
  for (; x < W; ++x) {
    T acc = 0;
    for (int i = 0; i < n; ++i) acc += w[i] * src[i][x];
    out[x] = acc;
  }
}

// Rows [y0, y1) of one plane [H, W] blurred into out (row y at out[(y − y0)·W]). row(y, dst)
// writes the plane's row y into dst[0, W): the input itself or a function of it (x², v·∂S/∂m).
template <typename T, class Row>
void blur_band(const Row& row, T* out, int64_t H, int64_t W, const T* g, int r, int64_t y0,
               int64_t y1, BlurScratch<T>& s) {
  const int64_t h0 = std::max<int64_t>(0, y0 - r), h1 = std::min<int64_t>(H, y1 + r);
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

// S and its partial derivatives with respect to the five moments at one pixel.
template <typename T>
struct SsimPixel {
  T s, d_mx, d_my, d_sxx, d_syy, d_sxy;
};

template <typename T>
inline SsimPixel<T> ssim_pixel(T mx, T my, T sxx, T syy, T sxy, T c1, T c2) {
  const T a1 = 2 * mx * my + c1, a2 = 2 * (sxy - mx * my) + c2;
  const T b1 = mx * mx + my * my + c1, b2 = (sxx - mx * mx) + (syy - my * my) + c2;
  const T inv = T(1) / (b1 * b2);
  const T s = a1 * a2 * inv;
  const T k = 2 * s * (T(1) / b2 - T(1) / b1);  // ∂S/∂mx through b1 and b2, over mx
  const T d_var = -s / b2;                      // ∂S/∂sxx = ∂S/∂syy
  return {s, 2 * my * (a2 - a1) * inv + mx * k, 2 * mx * (a2 - a1) * inv + my * k, d_var, d_var,
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

// Row functions for blur_band: plane p's row of a, or of a·b, gathered from channel-last images.
template <typename T>
auto plane_row(const Planes<const T>& a, int64_t p) {
  return [=](int64_t y, T* dst) {
    const T* src = a.row(p, y);
    for (int64_t i = 0; i < a.W; ++i) dst[i] = src[i * a.CH];
  };
}
template <typename T>
auto plane_product_row(const Planes<const T>& a, const Planes<const T>& b, int64_t p) {
  return [=](int64_t y, T* dst) {
    const T *sa = a.row(p, y), *sb = b.row(p, y);
    for (int64_t i = 0; i < a.W; ++i) dst[i] = sa[i * a.CH] * sb[i * a.CH];
  };
}

}  // namespace

template <typename T>
void ssim_fwd_images(const T* x, const T* y, const T* window, int r, double c1, double c2,
                     int64_t B, int64_t H, int64_t W, int64_t CH, T* ssim, T* moments) {
  const int64_t P = B * CH, HW = H * W;
  const Planes<const T> xs{x, H, W, CH}, ys{y, H, W, CH};
  const Planes<T> out{ssim, H, W, CH};
  const T* g = window;
  T* mp = moments;
  const T C1 = static_cast<T>(c1), C2 = static_cast<T>(c2);
  for_plane_bands<T>(P, H, W, r, [&](int64_t p, int64_t y0, int64_t y1, BlurScratch<T>& s) {
    T* m[kSsimMoments];
    for (int q = 0; q < kSsimMoments; ++q) m[q] = mp + (q * P + p) * HW + y0 * W;
    blur_band(plane_row(xs, p), m[0], H, W, g, r, y0, y1, s);
    blur_band(plane_row(ys, p), m[1], H, W, g, r, y0, y1, s);
    blur_band(plane_product_row(xs, xs, p), m[2], H, W, g, r, y0, y1, s);
    blur_band(plane_product_row(ys, ys, p), m[3], H, W, g, r, y0, y1, s);
    blur_band(plane_product_row(xs, ys, p), m[4], H, W, g, r, y0, y1, s);
    for (int64_t yy = y0; yy < y1; ++yy) {
      T* o = out.row(p, yy);
      for (int64_t i = (yy - y0) * W, xx = 0; xx < W; ++i, ++xx)
        o[xx * CH] = ssim_pixel(m[0][i], m[1][i], m[2][i], m[3][i], m[4][i], C1, C2).s;
    }
  });
}

template <typename T>
void ssim_bwd_images(const T* x, const T* y, const T* window_reversed, int r, double c1,
                     double c2, int64_t B, int64_t H, int64_t W, int64_t CH, const T* moments,
                     const T* v_ssim, T* v_x, T* v_y) {
  const int64_t P = B * CH, HW = H * W;
  const Planes<const T> xs{x, H, W, CH}, ys{y, H, W, CH}, vs{v_ssim, H, W, CH};
  const Planes<T> vx{v_x, H, W, CH}, vy{v_y, H, W, CH};
  const T *g = window_reversed, *mp = moments;
  const T C1 = static_cast<T>(c1), C2 = static_cast<T>(c2);
  for_plane_bands<T>(P, H, W, r, [&](int64_t p, int64_t y0, int64_t y1, BlurScratch<T>& s) {
    const T* m[kSsimMoments];
    for (int q = 0; q < kSsimMoments; ++q) m[q] = mp + (q * P + p) * HW;
    // v·∂S/∂(moment) along plane p's row, the partial picked by `pick`
    auto upstream = [&](auto pick) {
      return [=](int64_t row, T* dst) {
        const T* v = vs.row(p, row);
        for (int64_t i = row * W, xx = 0; xx < W; ++i, ++xx)
          dst[xx] = v[xx * CH] *
                    pick(ssim_pixel(m[0][i], m[1][i], m[2][i], m[3][i], m[4][i], C1, C2));
      };
    };
    // v_a = Bᵀ(v·∂S/∂m_a) + 2a·Bᵀ(v·∂S/∂s_aa) + b·Bᵀ(v·∂S/∂s_ab) for a = x or y
    const int64_t n = (y1 - y0) * W;
    std::vector<T> b_mean(n), b_sq(n), b_cross(n);
    auto combine = [&](const Planes<T>& v_a, const Planes<const T>& a, const Planes<const T>& b) {
      for (int64_t yy = y0; yy < y1; ++yy) {
        T* o = v_a.row(p, yy);
        const T *ra = a.row(p, yy), *rb = b.row(p, yy);
        for (int64_t i = (yy - y0) * W, xx = 0; xx < W; ++i, ++xx)
          o[xx * CH] = b_mean[i] + 2 * ra[xx * CH] * b_sq[i] + rb[xx * CH] * b_cross[i];
      }
    };
    blur_band(upstream([](const SsimPixel<T>& d) { return d.d_sxy; }), b_cross.data(), H, W, g,
              r, y0, y1, s);
    blur_band(upstream([](const SsimPixel<T>& d) { return d.d_mx; }), b_mean.data(), H, W, g,
              r, y0, y1, s);
    blur_band(upstream([](const SsimPixel<T>& d) { return d.d_sxx; }), b_sq.data(), H, W, g, r,
              y0, y1, s);
    combine(vx, xs, ys);
    if (!v_y) return;
    blur_band(upstream([](const SsimPixel<T>& d) { return d.d_my; }), b_mean.data(), H, W, g,
              r, y0, y1, s);
    blur_band(upstream([](const SsimPixel<T>& d) { return d.d_syy; }), b_sq.data(), H, W, g, r,
              y0, y1, s);
    combine(vy, ys, xs);
  });
}

#define GSR_SSIM_KERNELS(T)                                                                       \
  template void ssim_fwd_images<T>(const T*, const T*, const T*, int, double, double, int64_t,    \
                                   int64_t, int64_t, int64_t, T*, T*);                            \
  template void ssim_bwd_images<T>(const T*, const T*, const T*, int, double, double, int64_t,    \
                                   int64_t, int64_t, int64_t, const T*, const T*, T*, T*);
GSR_SSIM_KERNELS(float)
GSR_SSIM_KERNELS(double)
#undef GSR_SSIM_KERNELS

}  // namespace cpu
}  // namespace gsrender
