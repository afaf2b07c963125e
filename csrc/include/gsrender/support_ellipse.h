// Exact test of a Gaussian's α ≥ 1/255 support ellipse against a rectangle of pixel centres,
// the idea of Speedy-Splat's AccuTile: a Gaussian's bounding box meeting a tile does not mean its
// ellipse does (a small or elongated Gaussian near a tile corner misses it), so binning and
// packing by the box alone make pairs that can never contribute. Shared by both backends: the
// binning of each (for_each_bin_tile: the ellipse test over the tiles of a radii box) and the
// CPU raster's tile set-up (support_meets_tile: the support box as a pre-filter, then the same
// ellipse test on the same doubles), so every pair the set-up keeps is listed.
#pragma once
#include <cmath>

#include "gsrender/common.h"
#include "gsrender/tiles.h"

namespace gsrender {

// min over dx ∈ [lo, hi] of a·dx² + 2b·dx·dy + c·dy² (a > 0, dy fixed): the vertex dx = k·dy
// (k = −b/a, a per-Gaussian constant: no division per tile), clamped. Every product-sum is an
// explicit fma, so no compiler contraction choice (host ISA clones, nvcc's --fmad) changes the
// rounding: the CPU and CUDA binnings produce the same lists.
template <typename T>
GSR_HOST_DEVICE T support_edge_min(T a, T b, T c, T k, T dy, T lo, T hi) {
  T dx = k * dy;
  dx = dx < lo ? lo : (dx > hi ? hi : dx);
  return fma(a * dx, dx, fma(T(2) * b * dx, dy, c * dy * dy));
}

// The bound on dᵀQd that support_meets_spans tests: 2·ln(255·o) with a margin for the float32
// kernels' rounding of σ, whose error grows with Q's condition number ((a + c)²/det bounds it),
// so no pixel the kernels would light is ever dropped (det = ac − b²). level:
// support_level(opacity) (gsrender/alpha.h), computed once per Gaussian.
template <typename T>
GSR_HOST_DEVICE T support_bound(T a, T c, T det, T level) {
  return T(2) * fma(level, T(1) + T(1e-4) + T(1e-6) * (a + c) * (a + c) / det, T(1e-4));
}

// The test's per-Gaussian part, on the doubles the test runs in: false when no pixel can
// contribute, else its bound on dᵀQd (support_bound). Binning computes it once per Gaussian, not
// once per candidate tile; the values are the same either way.
template <typename T>
GSR_HOST_DEVICE bool support_rect_bound(T a, T b, T c, T level, T* bound) {
  const T det = fma(a, c, -(b * b));
  if (!(level > T(0)) || !(det > T(0)) || !(a > T(0))) return false;  // no pixel contributes
  *bound = support_bound(a, c, det, level);
  return true;
}

// The offsets m − (p + ½) of a mean from the pixel centres p0 ≤ p ≤ p1 along one axis: lo at
// p1, hi at p0. Binning computes one per tile column and one per tile row of a Gaussian's box,
// not four per tile.
template <typename T>
struct CentreSpan {
  T lo, hi;
  GSR_HOST_DEVICE bool covers() const { return lo <= T(0) && hi >= T(0); }  // the mean's inside
  GSR_HOST_DEVICE T near() const { return lo > T(0) ? lo : hi; }  // the edge nearer the mean
};
template <typename T>
GSR_HOST_DEVICE CentreSpan<T> centre_span(T m, int p0, int p1) {
  return {m - (T(p1) + T(0.5)), m - (T(p0) + T(0.5))};
}

// True when some pixel centre of the rectangle x × y (centre_span's) may have α = o·exp(−σ) ≥
// 1/255, σ = ½·dᵀQd, d = mean − centre, Q = [[a, b], [b, c]]: the minimum of the quadratic form
// over the rectangle against the bound (support_rect_bound's, which is false where no pixel
// contributes). The rectangle of centres is convex, so the minimum is 0 inside it and otherwise
// lies on an edge facing the mean. ka = −b/a and kc = −b/c: the edges' vertices per unit offset
// (support_edge_min), computed once per Gaussian by a caller that tests many tiles. Both edges
// are evaluated and the ones facing the mean selected, with no branch: binning runs this on
// tiles whose position relative to the mean varies at random. Meant for T = double.
template <typename T>
GSR_HOST_DEVICE bool support_meets_spans(T a, T b, T c, T ka, T kc, T bound, CentreSpan<T> x,
                                         CentreSpan<T> y) {
  const bool in_x = x.covers(), in_y = y.covers();
  // the horizontal edge nearer the mean (used when the mean is above or below the rectangle),
  // the vertical one (left or right of it)
  const T eh = support_edge_min(a, b, c, ka, y.near(), x.lo, x.hi);
  const T ev = support_edge_min(c, b, a, kc, x.near(), y.lo, y.hi);
  T q = T(INFINITY);
  q = !in_y && eh < q ? eh : q;
  q = !in_x && ev < q ? ev : q;
  return (in_x & in_y) | (q <= bound);  // NaN inputs: false
}

// The same for the rectangle [x0, x1] × [y0, y1] of pixels.
template <typename T>
GSR_HOST_DEVICE bool support_meets_rect_within(T mx, T my, T a, T b, T c, T ka, T kc, T bound,
                                               int x0, int y0, int x1, int y1) {
  return support_meets_spans(a, b, c, ka, kc, bound, centre_span(mx, x0, x1),
                             centre_span(my, y0, y1));
}

// A Gaussian's support for the tile test, computed once per frame: its mean and conic, ln(255·o)
// and the pixels its α ≥ 1/255 region can reach (support_pixel_box).
template <typename T>
struct Support {
  T mx, my, a, b, c;
  double level;
  PixelBox box;
};

template <typename T>
GSR_HOST_DEVICE Support<T> make_support(T mx, T my, T a, T b, T c, T opacity) {
  return {mx, my, a, b, c, support_level<double>(double(opacity)),
          support_pixel_box<T>(mx, my, a, b, c, opacity)};
}

// Whether some pixel of the rectangle [x0, x1] × [y0, y1] (a tile's pixels inside the image,
// tile_pixels) can have α ≥ 1/255: its support box meets the rectangle and so does the ellipse.
// bound: support_rect_bound's, computed once per Gaussian (−∞ where it is false: no pixel).
template <typename T>
GSR_HOST_DEVICE bool support_meets_tile(const Support<T>& s, double bound, const PixelBox& tile) {
  const double b = s.b;
  return bound > -INFINITY && s.box.meets(tile.x0, tile.y0, tile.x1, tile.y1) &&
         support_meets_rect_within<double>(s.mx, s.my, s.a, b, s.c, -b / s.a, -b / s.c, bound,
                                           tile.x0, tile.y0, tile.x1, tile.y1);
}

namespace support_detail {
// The tile columns' (or rows') spans of a box's NX tiles from t0 (tile_pixels' ranges).
template <int NX>
GSR_HOST_DEVICE void tile_spans(double m, int t0, int tile_size, int extent,
                                CentreSpan<double>* out) {
  GSR_UNROLL
  for (int k = 0; k < NX; ++k) {
    const int p0 = (t0 + k) * tile_size;
    out[k] = centre_span(m, p0, tile_last_pixel(p0, tile_size, extent));
  }
}

// for_each_bin_candidate's boxes of NX × NY tiles, NX, NY ≤ 3 (nearly every Gaussian's): the
// columns' and rows' spans once each, then the tiles in straight-line code.
template <int NX, int NY, class F>
GSR_HOST_DEVICE void small_box(const int* r, double mx, double my, double a, double b, double c,
                               double ka, double kc, double bound, int tile_size, int width,
                               int height, F& f) {
  CentreSpan<double> xs[NX], ys[NY];
  tile_spans<NX>(mx, r[0], tile_size, width, xs);
  tile_spans<NY>(my, r[1], tile_size, height, ys);
  GSR_UNROLL
  for (int j = 0; j < NY; ++j) {
    GSR_UNROLL
    for (int k = 0; k < NX; ++k)
      f(r[0] + k, r[1] + j, support_meets_spans(a, b, c, ka, kc, bound, xs[k], ys[j]));
  }
}
}  // namespace support_detail

// Binning's candidate tiles of Gaussian i (both backends): f(tx, ty, meets) for every tile of
// [r[0], r[2]] × [r[1], r[3]] (its radii box), row by row, meets telling whether the tile is a
// pair: every tile of the box when conics and opacities are null (box binning), else the tiles
// its α ≥ 1/255 support ellipse meets (and no call at all when no pixel can contribute). Boxes of
// up to 3 × 3 tiles (on a 1M-Gaussian scene all but ~3 %) take a path of their own shape in the
// CPU backend, with no loop: a CPU thread's branches then follow the box shape, not each tile.
template <typename T, class F>
GSR_HOST_DEVICE void for_each_bin_candidate(const int* r, const T* means2d, const T* conics,
                                            const T* opacities, int64_t i, int tile_size,
                                            int width, int height, F&& f) {
  if (conics == nullptr) {
    for (int ty = r[1]; ty <= r[3]; ++ty)
      for (int tx = r[0]; tx <= r[2]; ++tx) f(tx, ty, true);
    return;
  }
  // The ellipse test alone (support_meets_tile without its box pre-filter, whose square roots
  // would cost more per Gaussian than they save here), its per-Gaussian part hoisted out of the
  // tiles. It passes every tile support_meets_tile passes.
  const double mx = means2d[2 * i], my = means2d[2 * i + 1];
  const double a = conics[3 * i], b = conics[3 * i + 1], c = conics[3 * i + 2];
  double bound;
  if (!support_rect_bound<double>(a, b, c, support_level<double>(opacities[i]), &bound)) return;
  const double ka = -b / a, kc = -b / c;
#if defined(GSR_CPU_BACKEND)
  // (the device keeps the loop: the shapes' code cost the CUDA binning kernels 8–16 registers
  // each, and no GPU has measured whether it pays there; the SIMT build of the kernels, which
  // does not define GSR_CPU_BACKEND, runs the device's loop)
  using support_detail::small_box;
  if (r[2] - r[0] < 3 && r[3] - r[1] < 3) {
    switch ((r[2] - r[0]) * 3 + (r[3] - r[1])) {  // (columns − 1)·3 + rows − 1
#define GSR_SMALL_BOX(NX, NY)                                                                 \
  case (NX - 1) * 3 + NY - 1:                                                                 \
    return small_box<NX, NY>(r, mx, my, a, b, c, ka, kc, bound, tile_size, width, height, f);
      GSR_SMALL_BOX(1, 1) GSR_SMALL_BOX(1, 2) GSR_SMALL_BOX(1, 3)
      GSR_SMALL_BOX(2, 1) GSR_SMALL_BOX(2, 2) GSR_SMALL_BOX(2, 3)
      GSR_SMALL_BOX(3, 1) GSR_SMALL_BOX(3, 2) GSR_SMALL_BOX(3, 3)
#undef GSR_SMALL_BOX
    }
  }
#endif
  for (int ty = r[1]; ty <= r[3]; ++ty) {
    CentreSpan<double> y;
    support_detail::tile_spans<1>(my, ty, tile_size, height, &y);
    for (int tx = r[0]; tx <= r[2]; ++tx) {
      CentreSpan<double> x;
      support_detail::tile_spans<1>(mx, tx, tile_size, width, &x);
      f(tx, ty, support_meets_spans(a, b, c, ka, kc, bound, x, y));
    }
  }
}

// The tiles of for_each_bin_candidate that are pairs: f(tx, ty) for each, row by row; returns
// how many.
template <typename T, class F>
GSR_HOST_DEVICE int64_t for_each_bin_tile(const int* r, const T* means2d, const T* conics,
                                          const T* opacities, int64_t i, int tile_size, int width,
                                          int height, F&& f) {
  int64_t n = 0;
  for_each_bin_candidate<T>(r, means2d, conics, opacities, i, tile_size, width, height,
                            [&](int tx, int ty, bool meets) {
                              if (meets) f(tx, ty), ++n;
                            });
  return n;
}

}  // namespace gsrender
