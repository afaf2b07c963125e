// The compositing rule (docs/design.md §3) as one type: every scalar front-to-back pixel walk —
// the scalar forward, weight_stats and the contributor walk, CPU and CUDA — feeds it the α of its
// pairs in list order, so they cannot disagree on the weights, the 3DGS stop or the background
// epilogue.
//   sorted (3DGS):       w = α·T, T ← T·(1 − α); the pixel stops for good at the first pair whose
//                        T·(1 − α) would fall below kTransmittanceMin, and that pair is excluded;
//   weighted (sort-free): w = α·φ(z), Σw += w, T ← T·(1 − α); it never stops.
//   colour = sorted ? Σ w·f + T·bg : (Σ w·f + w_bg·bg) / (Σw + w_bg); aux = T or Σw + w_bg.
// The Tensor Core kernels evaluate the same rule sixteen pairs at a time with quad scans
// (mma::row_weights, whose comment argues why its stop is this one).
#pragma once
#include "gsrender/common.h"

namespace gsrender {

template <typename T>
struct Compositor {
  bool sorted;
  T trans = T(1);  // sorted: the transmittance T; weighted: Π(1 − α)
  T wsum = T(0);   // weighted: Σ α·φ

  // Sorted mode's stop: a pair with this α would take T below kTransmittanceMin.
  GSR_HOST_DEVICE bool crosses_stop(T alpha) const {
    return trans * (T(1) - alpha) < T(kTransmittanceMin);
  }
  // w = α·T and T ← T·(1 − α), with no stop (the contributor walk goes on past it).
  GSR_HOST_DEVICE T advance(T alpha) {
    const T w = alpha * trans;
    trans *= T(1) - alpha;
    return w;
  }
  // The weight of the next pair (α > 0, φ its depth weight, unused when sorted). Returns false,
  // leaving the state as it was, when the pixel stops at this pair.
  GSR_HOST_DEVICE bool take(T alpha, T phi, T* w) {
    if (sorted) {
      if (crosses_stop(alpha)) return false;
      *w = advance(alpha);
      return true;
    }
    *w = alpha * phi;
    wsum += *w;
    trans *= T(1) - alpha;
    return true;
  }
  // The output of a channel from its accumulated Σ w·f and background value.
  GSR_HOST_DEVICE T resolve(T acc, T bg, T w_bg) const {
    return sorted ? acc + trans * bg : (acc + w_bg * bg) / (wsum + w_bg);
  }
  // What the backward needs besides the output: T_final (sorted) or Σw + w_bg (weighted).
  GSR_HOST_DEVICE T aux(T w_bg) const { return sorted ? trans : wsum + w_bg; }
};

}  // namespace gsrender
