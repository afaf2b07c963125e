// The composition-weight statistics' kernel (weight_stats_kernel.cpp), torch-free: weight_stats.cpp,
// the op, checks the arguments and allocates what this writes.
#pragma once
#include <cstdint>

#include "gsrender/raster_args.h"

namespace gsrender {
namespace cpu {

template <typename T>
struct WeightStatsOut {
  T* wsum;            // [N] Σw over every pixel of every view (zeros in)
  T* wmax;            // [N] max w (zeros in)
  int32_t* nviews;    // [N] views in which the Gaussian dominates some pixel (zeros in)
  int32_t* topk_ids;  // [C, H, W, K] each pixel's top-K contributors (−1 in)
  T* topk_w;          // [C, H, W, K] their weights (zeros in)
};

// weight_stats over a's C views: w > tau_s dominates, K = top_k. T = float or double.
template <typename T>
void weight_stats_views(const RasterArgs<T>& a, double tau_s, int64_t K,
                        const WeightStatsOut<T>& o);

}  // namespace cpu
}  // namespace gsrender
