// Alpha of a (pixel, Gaussian) pair and its vector-Jacobian product (docs/design.md §3 "Alpha").
// Shared by every rasterizer (CPU matrix, CPU scalar, CUDA) so they evaluate one formula.
#pragma once
#include <cmath>

#include "gsrender/common.h"
#include "gsrender/math.h"

namespace gsrender {

// conic (a, b, c); (dx, dy) = mean2d - pixel centre.
template <typename T>
GSR_HOST_DEVICE T gaussian_sigma(T a, T b, T c, T dx, T dy) {
  return T(0.5) * (a * dx * dx + c * dy * dy) + b * dx * dy;
}

// α = min(0.99, o·exp(−σ)), or 0 where the pair does not contribute (σ < 0 from a degenerate
// conic, or α < 1/255).
template <typename T>
GSR_HOST_DEVICE T pair_alpha(T opacity, T sigma) {
  if (!(sigma >= T(0))) return T(0);
  T alpha = opacity * exp(-sigma);
  alpha = alpha < T(kAlphaMax) ? alpha : T(kAlphaMax);
  return alpha < T(kAlphaMin) ? T(0) : alpha;
}

// Accumulates the gradient of a contributing pair's α into the Gaussian's 2D parameters.
// v_alpha: dL/dα. Nothing flows where α was clamped at 0.99 (the clamp is flat there).
template <typename T>
struct AlphaGrad {
  T v_mean_x = 0, v_mean_y = 0, v_a = 0, v_b = 0, v_c = 0, v_opacity = 0;

  GSR_HOST_DEVICE void add(T v_alpha, T alpha, T opacity, T a, T b, T c, T dx, T dy) {
    if (alpha >= T(kAlphaMax) || opacity <= T(0)) return;
    // α = o·e^{−σ}: dα/do = α/o, dα/dσ = −α
    v_opacity += v_alpha * alpha / opacity;
    const T v_sigma = -v_alpha * alpha;
    v_a += v_sigma * T(0.5) * dx * dx;
    v_b += v_sigma * dx * dy;
    v_c += v_sigma * T(0.5) * dy * dy;
    v_mean_x += v_sigma * (a * dx + b * dy);
    v_mean_y += v_sigma * (b * dx + c * dy);
  }
};

// Weighted (sort-free) mode depth weight φ(z) = exp(−σ_w·z^β) and dφ/dz.
template <typename T>
GSR_HOST_DEVICE T depth_weight(T z, T sigma_w, T beta) {
  return exp(-sigma_w * pow(z > T(0) ? z : T(0), beta));
}
template <typename T>
GSR_HOST_DEVICE T depth_weight_dz(T z, T phi, T sigma_w, T beta) {
  if (!(z > T(0))) return T(0);
  return -phi * sigma_w * beta * pow(z, beta - T(1));
}

}  // namespace gsrender

namespace gsrender {

// The support (docs/design.md §3): α = o·exp(−σ) ≥ kAlphaMin iff σ ≤ level = ln(o/kAlphaMin) =
// ln(255·o), the one place that level is written: binning's and the CPU raster's ellipse test
// (support_ellipse.h, in double) and packing's boxes (support_extent) take it from here.
template <typename T>
GSR_HOST_DEVICE T support_level(T opacity) {
  return log(T(kAlphaMinInv) * opacity);
}

// The support's radius in Mahalanobis units, k = sqrt(2·max(level, 0)) (3.33 at o = 1: 3DGS's 3σ,
// derived from the cut): the radii are ceil(k·sqrt(cov2d_xx / yy)) (projection.h). Written with
// max(255·o, 1) inside gsr_log (the same value as max(level, 0)) and the precise float / double
// overloads of math.h; gsrender.reference.support_radius_factor is its float64 twin.
template <typename T>
GSR_HOST_DEVICE T support_radius_factor(T opacity) {
  return gsr_sqrt(T(2) * gsr_log(gsr_max(T(kAlphaMinInv) * opacity, T(1))));
}

// Half extents (ex, ey) of the exact region where α can reach 1/255: σ ≤ ln(255·o), i.e. the
// ellipse dᵀQd ≤ 2·ln(255·o) with Q = [[a, b], [b, c]]; its box has ex² = 2L·(Q⁻¹)_xx. Used for
// packing: a Gaussian is dropped from a sub-tile only when no pixel of it can contribute.
// Returns false when no pixel can contribute at all.
template <typename T>
GSR_HOST_DEVICE bool support_extent(T a, T b, T c, T opacity, T* ex, T* ey) {
  const T level = support_level(opacity);
  const T det = a * c - b * b;
  if (!(level > T(0)) || !(det > T(0))) return false;
  // a 1e-4 relative margin keeps float rounding from ever dropping a reachable pixel
  *ex = sqrt(T(2) * level * c / det) * T(1.0001) + T(1e-3);
  *ey = sqrt(T(2) * level * a / det) * T(1.0001) + T(1e-3);
  return true;
}

}  // namespace gsrender
