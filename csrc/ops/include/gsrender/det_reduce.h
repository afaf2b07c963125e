// rasterize_bwd(deterministic=true): bitwise-reproducible gradients by a fixed
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
//
// The torch-free pieces (fields, passes, the column sums) are in gsrender/det_pass.h; this
// header adds the ATen-side plan (the CPU backend's and the torch glue's).
#pragma once
#include <ATen/ATen.h>

#include <algorithm>

#include "gsrender/det_pass.h"

namespace gsrender {

// Host side: the entry order and each Gaussian's segment of it, and the channel chunk.
struct DetPlan {
  at::Tensor order;  // [M] int64: entries grouped by Gaussian, ascending inside a group
  at::Tensor seg;    // [G + 1] int64: Gaussian g's entries are order[seg[g] : seg[g + 1]]
  int64_t chunk;     // channels per tile pass

  DetPass pass(int64_t c0, int64_t CH) const { return det_pass(chunk, c0, CH); }
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
  plan.chunk = det_chunk(flatten_ids.numel(), CH, elem);
  return plan;
}

}  // namespace gsrender
