// The torch-free half of rasterize_bwd(deterministic=true) (the scheme: gsrender/det_reduce.h):
// part-row fields, the channel passes and the fixed-order column sums, shared by the CPU
// backend, the CUDA kernels and the CUDA launch layer.
#pragma once
#include <algorithm>
#include <cstdint>
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

// Channels per tile pass for M list entries, CH channels and elem-byte gradients: the most that
// keep part (M × (kDetFields + chunk) values) under det_budget_bytes(), at least one.
inline int64_t det_chunk(int64_t M, int64_t CH, int64_t elem) {
  const int64_t fit = det_budget_bytes() / (elem * std::max<int64_t>(M, 1)) - kDetFields;
  return std::clamp<int64_t>(fit, 1, std::max<int64_t>(CH, 1));
}

// The pass over channels [c0, c0 + chunk) ∩ [0, CH).
inline DetPass det_pass(int64_t chunk, int64_t c0, int64_t CH) {
  const int64_t nc = std::min(chunk, CH - c0);
  return {c0, nc, kDetFields + nc, c0 == 0};
}

}  // namespace gsrender
