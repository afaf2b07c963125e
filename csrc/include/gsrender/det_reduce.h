// rasterize_bwd(deterministic=true): bitwise-reproducible gradients (issue 3) by a fixed
// reduction order instead of atomics, shared by the CPU and CUDA backends.
//
// 1. The tile pass writes, for every tile-list entry e (one (tile, Gaussian) pair of
//    flatten_ids), that tile's partial sums into row e of part [M, stride]: the 2D-parameter
//    fields below, then the pass's channels of v_colors. Inside a tile the sum already has a
//    fixed order (CPU: one thread walks the sub-tiles in order; CUDA: warp shuffle tree, then
//    the warps in warp order). v_backgrounds gets one row per tile, [C·TH·TW, CH].
// 2. A stable sort of flatten_ids (values c·N + n) lists each Gaussian's entries in ascending
//    entry order; every output is then summed sequentially in that order (det_column_sum).
// Nothing depends on scheduling or on the thread count, so repeated runs agree bit for bit.
//
// Memory and cost: part holds M × (kDetFields + chunk) values, chunk being the most channels
// that keep it under det_budget_bytes() (kDetPartBudgetBytes, at least one channel). With more
// channels than that the tile pass runs once per chunk of channels (its α gradient needs every
// channel each time) and stores the 2D-parameter fields on the first pass only, so
// deterministic=True costs about ceil(CH / chunk) backward tile passes plus a sort of
// flatten_ids and the reduction.
#pragma once
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>

#include "gsrender/common.h"

namespace gsrender {

// The 2D-parameter fields of a part row; the pass's channels follow from kDetFields on.
enum DetField : int {
  kDetMeanX = 0,
  kDetMeanY,
  kDetConicA,
  kDetConicB,
  kDetConicC,
  kDetOpacity,
  kDetDepth,  // weighted mode's v_depths (0 when sorted)
  kDetFields
};

// Upper bound on part's size (a target: one channel per pass is the least it can hold).
constexpr int64_t kDetPartBudgetBytes = int64_t(512) << 20;

// The budget, unless the GSRENDER_DET_BUDGET_BYTES environment variable (a test knob, so
// chunking runs on small data) overrides it.
inline int64_t det_budget_bytes() {
  const char* env = std::getenv("GSRENDER_DET_BUDGET_BYTES");
  return env ? std::max<int64_t>(1, std::atoll(env)) : kDetPartBudgetBytes;
}

// One tile pass: part rows of stride = kDetFields + nc values, channels [c0, c0 + nc) of
// v_colors; the 2D-parameter fields and v_backgrounds are reduced on the first pass only.
struct DetPass {
  int64_t c0, nc, stride;
  bool first;
};

// The reduction's outputs ([C, N, ·] flat, indexed by Gaussian g = c·N + n).
template <typename T>
struct DetOut {
  T *v_means2d, *v_conics, *v_opacities, *v_colors, *v_depths;
  int64_t CH;
};

// Σ part[row(k), f] for k in [begin, end), in k order; row(k) = order[k], or k without order.
template <typename T>
GSR_HOST_DEVICE T det_column_sum(const T* part, int64_t stride, const int64_t* order,
                                 int64_t begin, int64_t end, int64_t f) {
  T s = T(0);
  for (int64_t k = begin; k < end; ++k) s += part[(order ? order[k] : k) * stride + f];
  return s;
}

// Where column f of Gaussian g goes in pass ps; nullptr for a field this pass does not reduce.
template <typename T>
GSR_HOST_DEVICE T* det_slot(const DetOut<T>& o, const DetPass& ps, int64_t g, int64_t f) {
  if (f >= kDetFields) return o.v_colors + g * o.CH + ps.c0 + (f - kDetFields);
  if (!ps.first) return nullptr;
  switch (f) {
    case kDetMeanX: return o.v_means2d + 2 * g;
    case kDetMeanY: return o.v_means2d + 2 * g + 1;
    case kDetConicA: return o.v_conics + 3 * g;
    case kDetConicB: return o.v_conics + 3 * g + 1;
    case kDetConicC: return o.v_conics + 3 * g + 2;
    case kDetOpacity: return o.v_opacities + g;
    default: return o.v_depths + g;
  }
}

// Reduces column f of Gaussian g (its entries order[seg[g] .. seg[g+1])) into its output.
template <typename T>
GSR_HOST_DEVICE void det_reduce_one(const DetOut<T>& o, const DetPass& ps, const T* part,
                                    const int64_t* order, const int64_t* seg, int64_t g,
                                    int64_t f) {
  T* dst = det_slot(o, ps, g, f);
  if (dst) *dst = det_column_sum(part, ps.stride, order, seg[g], seg[g + 1], f);
}

// Host side: the entry order and each Gaussian's segment of it, and the channel chunk.
struct DetPlan {
  at::Tensor order;  // [M] int64: entries grouped by Gaussian, ascending inside a group
  at::Tensor seg;    // [G + 1] int64: Gaussian g's entries are order[seg[g] : seg[g + 1]]
  int64_t chunk;     // channels per tile pass

  DetPass pass(int64_t c0, int64_t CH) const {
    const int64_t nc = std::min(chunk, CH - c0);
    return {c0, nc, kDetFields + nc, c0 == 0};
  }
};

// G = C·N Gaussians (flatten_ids holds c·N + n); elem = sizeof the gradient type. The stable
// sort and searchsorted are deterministic on both backends.
inline DetPlan make_det_plan(const at::Tensor& flatten_ids, int64_t G, int64_t CH, int64_t elem) {
  DetPlan plan;
  const auto sorted = at::sort(flatten_ids, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  plan.order = std::get<1>(sorted).contiguous();
  const auto opts = flatten_ids.options().dtype(at::kLong);
  plan.seg = at::searchsorted(std::get<0>(sorted).to(at::kLong), at::arange(G + 1, opts))
                 .contiguous();
  const int64_t M = std::max<int64_t>(flatten_ids.numel(), 1);
  const int64_t fit = det_budget_bytes() / (elem * M) - kDetFields;
  plan.chunk = std::clamp<int64_t>(fit, 1, std::max<int64_t>(CH, 1));
  return plan;
}

}  // namespace gsrender
