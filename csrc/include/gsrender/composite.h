// The compositing rule (docs/design.md §3) as one type: every front-to-back pixel walk — the
// scalar forward, weight_stats and the contributor walk (CPU and CUDA), and the CPU row walks of
// the forward and the backward replay, eight pixels a vector — feeds it the α of its pairs in
// list order, so they cannot disagree on the weights, the 3DGS stop or the background epilogue.
//   sorted (3DGS):       w = α·T, T ← T·(1 − α); the pixel stops for good at the first pair whose
//                        T·(1 − α) would fall below kTransmittanceMin, and that pair is excluded;
//   weighted (sort-free): w = α·φ(z), Σw += w, T ← T·(1 − α); it never stops.
//   colour = sorted ? Σ w·f + T·bg : (Σ w·f + w_bg·bg) / (Σw + w_bg); aux = T or Σw + w_bg.
// Compositor<V, M, S> runs on lanes: V the value type, M its mask, S the scalar. One pixel is
// Compositor<T> (V = S = T, M = bool); the CPU row walk is Compositor<V, M, T> on the 8-pixel
// vectors of cpu/lanes.h (GCC vector extensions: comparisons give 0/−1 lane masks and `m ? a : b`
// selects per lane), so the same take/resolve/aux code serves both.
// CompositorGrad below holds the backward's recurrences. The Tensor Core kernels evaluate the same
// rule sixteen pairs at a time: a quad scan gives each of a lane's columns the transmittance (the
// backward: the suffix sum) a sequential walk would have there, and the column's step is this
// type's (mma::row_weights, whose comment argues why the stop is exact; mma::row_suffix_sums).
#pragma once
#include <type_traits>

#include "gsrender/common.h"

namespace gsrender {

// Per-lane select and a ∧ ¬b, for bool masks and for vector masks.
template <typename M, typename V>
GSR_HOST_DEVICE V lane_select(const M& m, const V& a, const V& b) {
  if constexpr (std::is_same_v<M, bool>)
    return m ? a : b;
  else
    return m < 0 ? a : b;  // 0 / −1 lanes: the sign bit is the blend's own test (no compare)
}
template <typename M>
GSR_HOST_DEVICE M mask_and_not(const M& a, const M& b) {
  if constexpr (std::is_same_v<M, bool>)
    return a && !b;
  else
    return a & ~b;
}

template <typename V, typename M = bool, typename S = V>
struct Compositor {
  bool sorted;
  V trans = V{} + S(1);  // sorted: the transmittance T; weighted: Π(1 − α)
  V wsum = V{};          // weighted: Σ α·φ

  // T after a pair with this α, on every lane.
  GSR_HOST_DEVICE V after(const V& alpha) const { return trans * (S(1) - alpha); }
  // Sorted mode's stop: the lanes where a pair with this α would take T below kTransmittanceMin.
  GSR_HOST_DEVICE M crosses_stop(const V& alpha) const {
    return after(alpha) < S(kTransmittanceMin);
  }
  // The pair's weight on the lanes `live` (0 elsewhere), T advanced there, with no stop: the
  // backward's replay of pairs the forward kept, and the contributor walk, which goes on past it.
  GSR_HOST_DEVICE V advance(const M& live, const V& alpha, const V& phi) {
    const V w = lane_select(live, alpha * (sorted ? trans : phi), V{});
    if (!sorted) wsum += w;
    trans = lane_select(live, after(alpha), trans);
    return w;
  }
  // The next pair on the lanes `live` (where its α > 0; φ its depth weight, unused when sorted).
  // Returns the lanes it contributes on, with w its weight there (0 elsewhere); `stop` gets the
  // lanes whose pixel stops at this pair (sorted mode), where the state stays as it was.
  GSR_HOST_DEVICE M take(const M& live, const V& alpha, const V& phi, V& w, M& stop) {
    stop = sorted ? M(live & crosses_stop(alpha)) : M{};
    const M on = mask_and_not(live, stop);
    w = advance(on, alpha, phi);
    return on;
  }
  // One pixel (V = S): the weight of its next pair (α > 0) in *w, or false, leaving the state as
  // it was, when the pixel stops at this pair.
  GSR_HOST_DEVICE bool take(S alpha, S phi, S* w) {
    M stop;
    take(true, alpha, phi, *w, stop);
    return !stop;
  }
  GSR_HOST_DEVICE S advance(S alpha) { return advance(true, alpha, S(0)); }
  // Lane l of a vector compositor as a one-pixel one.
  GSR_HOST_DEVICE Compositor<S, bool, S> lane(int l) const { return {sorted, trans[l], wsum[l]}; }

  // The output of a channel (or, one pixel, a vector of its channels) from its accumulated Σ w·f
  // and background value.
  template <typename A>
  GSR_HOST_DEVICE A resolve(const A& acc, const A& bg, S w_bg) const {
    return sorted ? acc + trans * bg : (acc + w_bg * bg) / (wsum + w_bg);
  }
  // What the backward needs besides the output: T_final (sorted) or Σw + w_bg (weighted).
  GSR_HOST_DEVICE V aux(S w_bg) const { return sorted ? trans : wsum + w_bg; }
};

// The backward of the rule (docs/design.md §4), one pixel per lane, its contributing pairs walked
// back to front (front to back with kFrontToBack, below). g = scale·v_render is the gradient of Σ w·f (scale 1 sorted, 1/(Σw + w_bg)
// weighted), v_w_k = g·f_k the gradient of pair k's weight.
//   sorted:   S = T_final·(g·bg − v_alpha) + Σ_{j>k} w_j·v_w_j, carried back to front;
//             v_α_k = T_k·v_w_k − S/(1 − α_k), then S += w_k·v_w_k;   v_bg = T_final·v_render;
//   weighted: net_k = v_w_k − g·OUT (∂(N/D)/∂w_k with g already divided by D);
//             v_α_k = net_k·φ_k + v_alpha·T_final/(1 − α_k), v_z_k = net_k·α_k·φ'(z_k);
//             v_bg = w_bg·g;
// with v_alpha the gradient of the alphas output (1 − T_final) and T_k the transmittance before
// pair k. How T_k is recovered differs by backend, on purpose:
//   CPU:  replayed front to back (Compositor::advance over the same pairs): the forward's own
//         products, so T_k is exact; the row walk takes each pair's gradients in the same pass
//         (kFrontToBack), so no pair is kept for a second walk back.
//   CUDA: divided out back to front, T_k = T_{k+1}/(1 − α_k) from T_final (recover()), as 3DGS
//         and gsplat do: one pass down the list from each pixel's last contributor, no per-pair
//         storage in a thread. α ≤ kAlphaMax = 0.99 keeps each division within a few ulps; the
//         relative error grows with the number of pairs only linearly (a few 1e-6 over
//         hundreds of pairs in float32), and the tests compare both to the float64 oracle.
//   Tensor Core backward: T_k = w_k/α_k, and the walk runs front to back (kFrontToBack below).
// kFrontToBack: the sorted suffix sum starts at S_total, the seed plus every pair's w·v_w, which
// the forward output gives without a walk: S_total = Σ_c g·OUT − T_final·v_alpha (channel() or
// add_seed(), and seal() below); each pair takes its w·v_w off before its v_α (step(), pass()).
// The Tensor Core backward needs it: its pairs come sixteen at a time, front to back, with a quad
// scan of w·v_w for the columns in between (mma::row_suffix_sums); the CPU row walk, to take every
// pair's gradients in the pass that recomputes its α and T. The suffix sum is then a difference from
// S_total, exact to a rounding of S_total rather than of the sum itself: on the benchmark scene
// (float32 against float64, random cotangents) the gradients' relative errors were the same to
// three digits either way. Weighted mode is the same either way.
template <typename V, typename S = V, bool kFrontToBack = false>
struct CompositorGrad {
  bool sorted;
  V t_final{};      // T after the last pair (sorted: aux; weighted: 1 − alphas)
  V v_alpha_out{};  // dL/d alphas
  V scale{};        // g = scale·v_render
  V s{};            // sorted: the suffix sum S (front to back: S before the next pair); weighted: g·OUT
  V trans{};        // the CUDA walk's T, divided out back to front (recover)

  // One pixel (V = S): the state from the forward's aux and alphas outputs and dL/d alphas;
  // then channel() for each channel, then seal().
  GSR_HOST_DEVICE void start(S aux, S alpha_out, S v_alpha) {
    t_final = sorted ? aux : S(1) - alpha_out;
    scale = sorted ? S(1) : S(1) / aux;
    v_alpha_out = v_alpha;
    s = S(0);
    trans = t_final;
  }
  // The same with channel() and seal() run elsewhere (the Tensor Core backward's prepass): s their
  // sealed sum.
  GSR_HOST_DEVICE void start(S aux, S alpha_out, S v_alpha, S sealed) {
    start(aux, alpha_out, v_alpha);
    s = sealed;
  }
  // Channel c of the pixel (upstream v_render, background bg, 0 without one; forward output
  // out): its share of the seed (front to back, of S_total: g·out in both modes), and g_c.
  GSR_HOST_DEVICE S channel(S v_render, S bg, S out) {
    const S g = gradient(v_render);
    s += sorted && !kFrontToBack ? v_render * bg : g * out;
    return g;
  }
  // Front to back: the channels' whole share of the seed, Σ_c g_c·out_c, summed by the caller
  // (channel() per channel is a chain of CH dependent adds; the CPU sums them in vectors).
  GSR_HOST_DEVICE void add_seed(S g_dot_out) {
    static_assert(kFrontToBack, "back to front, sorted mode seeds from v_render·bg instead");
    s += g_dot_out;
  }
  // g_c alone, its seed share left to add_seed.
  GSR_HOST_DEVICE S gradient(S v_render) const { return v_render * scale; }
  // Sorted: the suffix sum's seed, the background and alpha-output terms of v_α (front to back:
  // S_total).
  GSR_HOST_DEVICE void seal() {
    if (sorted) s = kFrontToBack ? s - t_final * v_alpha_out : t_final * (s - v_alpha_out);
  }
  // dL/d bg of channel c from this pixel.
  GSR_HOST_DEVICE S v_bg(S v_render, S w_bg) const {
    return sorted ? t_final * v_render : w_bg * (v_render * scale);
  }
  // Lane l of a vector state from a one-pixel one.
  GSR_HOST_DEVICE void set_lane(int l, const CompositorGrad<S, S, kFrontToBack>& p) {
    t_final[l] = p.t_final, v_alpha_out[l] = p.v_alpha_out, scale[l] = p.scale, s[l] = p.s;
    trans[l] = p.trans;
  }

  // v_α of one pair from its T_k, α, gradient v_w of its weight and the suffix sum S after it.
  GSR_HOST_DEVICE static V sorted_v_alpha(const V& t_before, const V& alpha, const V& v_w,
                                         const V& s_after) {
    return t_before * v_w - s_after / (S(1) - alpha);
  }
  GSR_HOST_DEVICE static V weighted_v_alpha(const V& net, const V& phi, const V& alpha,
                                           const V& v_alpha_out, const V& t_final) {
    return net * phi + v_alpha_out * t_final / (S(1) - alpha);
  }

  // The CUDA walk's T_k from T_{k+1} (see above).
  GSR_HOST_DEVICE V recover(const V& alpha) {
    trans = trans / (S(1) - alpha);
    return trans;
  }
  // Sorted: the suffix sum carried past pairs whose w·v_w sum to wv, in the walk's direction.
  GSR_HOST_DEVICE void pass(const V& wv) {
    if constexpr (kFrontToBack)
      s = s - wv;
    else
      s += wv;
  }
  // Pair k, the next in the walk's direction, with α, T_k, weight w and v_w (lanes where it does
  // not contribute come with α = w = 0 and are masked by the caller). Returns v_α_k; weighted,
  // *net = net_k.
  GSR_HOST_DEVICE V step(const V& alpha, const V& t_before, const V& w, const V& v_w,
                         const V& phi, V* net) {
    if (sorted) {
      if constexpr (kFrontToBack) {  // S before the pair → the S after it v_α needs
        pass(w * v_w);
        return sorted_v_alpha(t_before, alpha, v_w, s);
      }
      const V v_al = sorted_v_alpha(t_before, alpha, v_w, s);
      s += w * v_w;
      return v_al;
    }
    *net = v_w - s;
    return weighted_v_alpha(*net, phi, alpha, v_alpha_out, t_final);
  }
};

}  // namespace gsrender
