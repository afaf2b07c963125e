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

// True when some pixel centre (x + 0.5, y + 0.5), x0 ≤ x ≤ x1, y0 ≤ y ≤ y1, may have
// α = o·exp(−σ) ≥ 1/255, σ = ½·dᵀQd, d = mean − centre, Q = [[a, b], [b, c]]: the minimum of the
// quadratic form over the rectangle against 2·ln(255·o). (The rectangle of centres is convex, so
// the minimum is 0 inside it and otherwise lies on an edge facing the mean.) Conservative: the
// level carries a margin for the float32 kernels' rounding of σ, whose error grows with Q's
// condition number ((a + c)²/det bounds it), so no pixel the kernels would light is ever dropped.
// level: support_level(opacity) (gsrender/alpha.h), computed once per Gaussian. Meant for
// T = double on the host.

// The bound on dᵀQd that support_meets_rect_within tests: 2·ln(255·o) with that margin
// (det = ac − b²).
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

// Whether dᵀQd ≤ bound at some pixel centre of the rectangle (the bound: support_rect_bound's,
// which is false where no pixel contributes). ka = −b/a and kc = −b/c: the edges' vertices per
// unit offset (support_edge_min), computed once per Gaussian by a caller that tests many tiles.
template <typename T>
GSR_HOST_DEVICE bool support_meets_rect_within(T mx, T my, T a, T b, T c, T ka, T kc, T bound,
                                               int x0, int y0, int x1, int y1) {
  const T dxlo = mx - (T(x1) + T(0.5)), dxhi = mx - (T(x0) + T(0.5));
  const T dylo = my - (T(y1) + T(0.5)), dyhi = my - (T(y0) + T(0.5));
  const bool in_x = dxlo <= T(0) && dxhi >= T(0), in_y = dylo <= T(0) && dyhi >= T(0);
  if (in_x && in_y) return true;
  T q = T(INFINITY);
  if (!in_y) {  // the horizontal edge nearer the mean
    const T e = support_edge_min(a, b, c, ka, dylo > T(0) ? dylo : dyhi, dxlo, dxhi);
    q = e < q ? e : q;
  }
  if (!in_x) {  // the vertical edge nearer the mean
    const T e = support_edge_min(c, b, a, kc, dxlo > T(0) ? dxlo : dxhi, dylo, dyhi);
    q = e < q ? e : q;
  }
  return q <= bound;  // NaN inputs: false
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

// Binning's pairs of Gaussian i (both backends): the tiles [r[0], r[2]] × [r[1], r[3]] of its
// radii box and, when conics and opacities are given (exact binning), only the tiles its
// support ellipse meets. Calls f(tx, ty) for each, row by row; returns how many.
template <typename T, class F>
GSR_HOST_DEVICE int64_t for_each_bin_tile(const int* r, const T* means2d, const T* conics,
                                          const T* opacities, int64_t i, int tile_size, int width,
                                          int height, F&& f) {
  int64_t n = 0;
  if (conics == nullptr) {
    for (int ty = r[1]; ty <= r[3]; ++ty)
      for (int tx = r[0]; tx <= r[2]; ++tx) f(tx, ty), ++n;
    return n;
  }
  // The ellipse test alone (support_meets_tile without its box pre-filter, whose square roots
  // would cost more per Gaussian than they save here), its per-Gaussian part hoisted out of the
  // tiles. It passes every tile support_meets_tile passes.
  const double mx = means2d[2 * i], my = means2d[2 * i + 1];
  const double a = conics[3 * i], b = conics[3 * i + 1], c = conics[3 * i + 2];
  double bound;
  if (!support_rect_bound<double>(a, b, c, support_level<double>(opacities[i]), &bound)) return 0;
  const double ka = -b / a, kc = -b / c;
  for (int ty = r[1]; ty <= r[3]; ++ty)
    for (int tx = r[0]; tx <= r[2]; ++tx) {
      const PixelBox t = tile_pixels(tx, ty, tile_size, width, height);
      if (support_meets_rect_within<double>(mx, my, a, b, c, ka, kc, bound, t.x0, t.y0, t.x1,
                                            t.y1))
        f(tx, ty), ++n;
    }
  return n;
}

}  // namespace gsrender
