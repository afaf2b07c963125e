// make_support and support_rect_bound (gsrender/support_ellipse.h) for 8 consecutive float32
// Gaussians at once, one per lane: the raster's prepare_gaussians. (Binning's list_pairs keeps
// the scalar make_support, run only where the radii box is on the image: docs/cpu.md,
// "Tried and not kept".) Bitwise the scalar code by construction: each lane runs the scalar's
// operations in its order and precision (with -ffp-contract=off nothing is fused but the
// explicit fma's, setup.py), including the scalar's promotions — the host's log and sqrt of a
// float argument are the double functions (math.h's), so the support box's level and extents
// are computed in double and rounded back to float where the scalar rounds them. The two double
// logs per Gaussian stay libm calls (no vector log gives libm's bits); the divisions, square
// roots and roundings run across lanes.
#pragma once
#include <emmintrin.h>

#include <climits>
#include <cmath>

#include "gsrender/support_ellipse.h"
#include "simd.h"

namespace gsrender {
namespace cpu {

// The supports of 8 Gaussians, as make_support<float> gives each, and support_rect_bound's
// bound (−∞ where it is false: no pixel can contribute).
struct SupportLanes {
  f8 mx, my, a, b, c;
  double level[kLanes], bound[kLanes];
  i8 x0, y0, x1, y1;  // the support box

  Support<float> support(int l) const {
    return {mx[l], my[l], a[l], b[l], c[l], level[l], {x0[l], y0[l], x1[l], y1[l]}};
  }
};

namespace support_lanes_detail {
typedef double d4 __attribute__((vector_size(32)));
typedef int64_t l4 __attribute__((vector_size(32)));

// static_cast<int>(ceil(x)) / static_cast<int>(floor(x)) per lane, without SSE4.1's rounding
// (the baseline copy has SSE2 only): truncate, then step where the truncation is on the wrong
// side. INT_MIN, the conversion's result out of range or for NaN (as the scalar's), stays.
[[gnu::always_inline]] inline i8 ceil_int(f8 x) {
  const i8 t = __builtin_convertvector(x, i8);
  return t - ((__builtin_convertvector(t, f8) < x) & (t != INT_MIN));
}
[[gnu::always_inline]] inline i8 floor_int(f8 x) {
  const i8 t = __builtin_convertvector(x, i8);
  return t + ((__builtin_convertvector(t, f8) > x) & (t != INT_MIN));
}
// Correctly rounded, as libm's sqrt (SSE2's sqrtpd, in every copy).
[[gnu::always_inline]] inline d4 sqrt4(d4 x) {
  const __m128d lo = _mm_sqrt_pd(__m128d{x[0], x[1]}), hi = _mm_sqrt_pd(__m128d{x[2], x[3]});
  return d4{lo[0], lo[1], hi[0], hi[1]};
}
[[gnu::always_inline]] inline d4 fma4(d4 a, d4 b, d4 c) {
  d4 r;
  for (int l = 0; l < 4; ++l) r[l] = std::fma(a[l], b[l], c[l]);
  return r;
}
}  // namespace support_lanes_detail

// Gaussians 0 .. 7 of means2d [·, 2], conics [·, 3], opacities [·].
[[gnu::always_inline]] inline SupportLanes support_lanes(const float* means2d, const float* conics,
                                                         const float* opacities) {
  using namespace support_lanes_detail;
  SupportLanes s;
  f8 o, levf;
  for (int l = 0; l < kLanes; ++l) {
    s.mx[l] = means2d[2 * l], s.my[l] = means2d[2 * l + 1];
    s.a[l] = conics[3 * l], s.b[l] = conics[3 * l + 1], s.c[l] = conics[3 * l + 2];
    o[l] = opacities[l];
  }
  // support_level<double>(double(o)) and support_level<float>(o): log(double(255.0f · o))
  const f8 x = float(kAlphaMinInv) * o;
  for (int l = 0; l < kLanes; ++l) {
    s.level[l] = std::log(kAlphaMinInv * double(o[l]));
    levf[l] = float(std::log(double(x[l])));
  }
  // support_pixel_box<float> (support_extent): the extents' square roots and their margins in
  // double, the sums rounded back to float
  const f8 det = s.a * s.c - s.b * s.b;
  const i8 ok = (levf > 0.0f) & (det > 0.0f);
  const f8 qx = 2.0f * levf * s.c / det, qy = 2.0f * levf * s.a / det;
  f8 ex, ey;
  for (int h = 0; h < kLanes; h += 4) {
    const d4 dx = sqrt4(d4{qx[h], qx[h + 1], qx[h + 2], qx[h + 3]}) * double(1.0001f) + double(1e-3f);
    const d4 dy = sqrt4(d4{qy[h], qy[h + 1], qy[h + 2], qy[h + 3]}) * double(1.0001f) + double(1e-3f);
    for (int l = 0; l < 4; ++l) ex[h + l] = float(dx[l]), ey[h + l] = float(dy[l]);
  }
  s.x0 = ok ? ceil_int(s.mx - ex - 0.5f) : 0, s.y0 = ok ? ceil_int(s.my - ey - 0.5f) : 0;
  s.x1 = ok ? floor_int(s.mx + ex - 0.5f) : -1, s.y1 = ok ? floor_int(s.my + ey - 0.5f) : -1;
  // support_rect_bound<double> on the float conic
  for (int h = 0; h < kLanes; h += 4) {
    const d4 a{s.a[h], s.a[h + 1], s.a[h + 2], s.a[h + 3]};
    const d4 b{s.b[h], s.b[h + 1], s.b[h + 2], s.b[h + 3]};
    const d4 c{s.c[h], s.c[h + 1], s.c[h + 2], s.c[h + 3]};
    const d4 level{s.level[h], s.level[h + 1], s.level[h + 2], s.level[h + 3]};
    const d4 det = fma4(a, c, -(b * b));
    const l4 ok = (level > 0.0) & (det > 0.0) & (a > 0.0);
    // support_bound: 2·fma(level, 1 + 1e-4 + 1e-6·(a + c)²/det, 1e-4)
    const d4 bound = 2.0 * fma4(level, 1.0 + 1e-4 + 1e-6 * (a + c) * (a + c) / det, d4{} + 1e-4);
    for (int l = 0; l < 4; ++l) s.bound[h + l] = ok[l] ? bound[l] : -INFINITY;
  }
  return s;
}

}  // namespace cpu
}  // namespace gsrender
