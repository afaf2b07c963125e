// weight_stats' per-pixel top-K insertion (SplitGS-Loc, docs/design.md §7), GSR_HOST_DEVICE and
// torch-free: both backends rank ties alike.
#pragma once
#include <cstdint>

#include "gsrender/common.h"

namespace gsrender {

constexpr int64_t kMaxTopK = 64;

// Keeps the K largest (weight, id) pairs of one pixel, sorted by weight (descending; ties keep
// the earlier, i.e. nearer, Gaussian first). ws / ids start as K zeros / -1.
template <typename T>
GSR_HOST_DEVICE void topk_insert(T w, int32_t id, int64_t K, T* ws, int32_t* ids) {
  if (K == 0 || !(w > ws[K - 1])) return;
  int64_t i = K - 1;
  while (i > 0 && w > ws[i - 1]) {
    ws[i] = ws[i - 1], ids[i] = ids[i - 1];
    --i;
  }
  ws[i] = w, ids[i] = id;
}

}  // namespace gsrender
