// Exact test of a Gaussian's α ≥ 1/255 support ellipse against a rectangle of pixel centres,
// the idea of Speedy-Splat's AccuTile: a Gaussian's bounding box meeting a tile does not mean its
// ellipse does (a small or elongated Gaussian near a tile corner misses it), so binning and
// packing by the box alone make pairs that can never contribute. Shared by both backends.
#pragma once
#include <cmath>

#include "gsrender/common.h"

namespace gsrender {

// min over dx ∈ [lo, hi] of a·dx² + 2b·dx·dy + c·dy² (a > 0, dy fixed): the vertex, clamped.
template <typename T>
GSR_HOST_DEVICE T support_edge_min(T a, T b, T c, T dy, T lo, T hi) {
  T dx = -b * dy / a;
  dx = dx < lo ? lo : (dx > hi ? hi : dx);
  return a * dx * dx + T(2) * b * dx * dy + c * dy * dy;
}

// True when some pixel centre (x + 0.5, y + 0.5), x0 ≤ x ≤ x1, y0 ≤ y ≤ y1, may have
// α = o·exp(−σ) ≥ 1/255, σ = ½·dᵀQd, d = mean − centre, Q = [[a, b], [b, c]]: the minimum of the
// quadratic form over the rectangle against 2·ln(255·o). (The rectangle of centres is convex, so
// the minimum is 0 inside it and otherwise lies on an edge facing the mean.) Conservative: the
// level carries a margin for the float32 kernels' rounding of σ, whose error grows with Q's
// condition number ((a + c)²/det bounds it), so no pixel the kernels would light is ever dropped.
// level: support_level(opacity), computed once per Gaussian. Meant for T = double on the host.
template <typename T>
GSR_HOST_DEVICE T support_level(T opacity) {
  return log(T(kAlphaMinInv) * opacity);
}

template <typename T>
GSR_HOST_DEVICE bool support_meets_rect(T mx, T my, T a, T b, T c, T level, int x0, int y0,
                                        int x1, int y1) {
  const T det = a * c - b * b;
  if (!(level > T(0)) || !(det > T(0)) || !(a > T(0))) return false;  // no pixel contributes
  const T bound = T(2) * (level * (T(1) + T(1e-4) + T(1e-6) * (a + c) * (a + c) / det) + T(1e-4));
  const T dxlo = mx - (T(x1) + T(0.5)), dxhi = mx - (T(x0) + T(0.5));
  const T dylo = my - (T(y1) + T(0.5)), dyhi = my - (T(y0) + T(0.5));
  const bool in_x = dxlo <= T(0) && dxhi >= T(0), in_y = dylo <= T(0) && dyhi >= T(0);
  if (in_x && in_y) return true;
  T q = T(INFINITY);
  if (!in_y) {  // the horizontal edge nearer the mean
    const T e = support_edge_min(a, b, c, dylo > T(0) ? dylo : dyhi, dxlo, dxhi);
    q = e < q ? e : q;
  }
  if (!in_x) {  // the vertical edge nearer the mean
    const T e = support_edge_min(c, b, a, dxlo > T(0) ? dxlo : dxhi, dylo, dyhi);
    q = e < q ? e : q;
  }
  return q <= bound;  // NaN inputs: false
}

}  // namespace gsrender
