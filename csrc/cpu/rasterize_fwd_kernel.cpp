// CPU forward rasterizer in the matrix formulation (docs/design.md §4), on 8-pixel row segments: per tile
// row, W (its contributing Gaussians × 8 pixels) from the exact transmittance scan run as vectors
// over the pixels, then OUT = Wᵀ·F as a register-blocked GEMM (gemm.h). docs/cpu.md walks through
// it. The plan's kScalar (precision fp32, sorted) keeps the one-pixel-at-a-time 3DGS loop as the
// in-house baseline.
#include "pixel_contraction.h"  // first: it sets the compile options of all that follows
#include "rasterize_fwd_kernel.h"

#include <type_traits>

#include "gemm.h"
#include "gsrender/composite.h"
#include "host_blocks.h"
#include "isa.h"
#include "raster_tile.h"
#include "row_tile.h"
#include "stream_store.h"

namespace gsrender {
namespace cpu {
namespace {

// Per-thread scratch, reused across tiles.
template <typename T>
struct FwdScratch {
  using V = typename Lanes<T>::V;
  TileRows<T> tile;
  TileFeatures<T> feats;                // the tile's kept feature rows (copied or in place)
  std::vector<int32_t> list;            // [segments, cap]: one row's entries per segment
  LaneVector<V> w;                      // [cap]: one segment's contributing weights
  std::vector<const T*> rows;            // [cap]: their channel rows
  std::vector<int32_t> at;              // [cap]: their tile-list positions
  std::vector<int32_t> halves;          // [2, cap]: those lighting each 4-pixel half
  LaneVector<V> acc;                    // [CH]: one segment's output, channel-major
  LineVector<T> stage;                  // [kLanes, CH]: one segment's pixels, when streamed
  bool stream = false;                  // write whole segments with streaming stores (kStreamMin)
  int64_t listed = 0, computed = 0, useful = 0;
  double reach = 1;  // sorted: the share of its list the last tile's pixels needed (render_tile)
};

// Sorted mode: 1 + the tile-list position of lane l's last contributing pair (start when none),
// from the segment's contributing pairs: the last weight nonzero on that lane (w ≠ 0 exactly
// where the lane contributes: α ≥ 1/255 and T ≥ 1e-4). Walked back from the end, where nearly
// every pixel's last contributor is, instead of a select per pair in the scan.
template <typename V>
int32_t last_contributor(const V* W, const int32_t* I, int nw, int l, int32_t start) {
  for (int k = nw - 1; k >= 0; --k)
    if (W[k][l] != 0) return start + I[k] + 1;
  return start;
}

// One image row of a tile, segment by segment: the Gaussians whose support crosses the segment
// front to back, α and the transmittance scan as vectors over its 8 pixels (the state in
// registers, no branch per pair but the saturation stop), stopping as soon as all its pixels
// saturate; then OUT = Wᵀ·F as register-blocked GEMM over its contributing Gaussians only, and
// the pixels' outputs. kSorted: a.sorted, fixed at compile time so the scan carries no mode branch;
// CW: the feature channels' vector width (gemm.h: ChanVec), chosen per ISA by the caller.
// Returns how far into the tile list its pixels needed to read: the largest list position + 1 at
// which a segment saturated, or n_list when some segment did not (weighted mode: always).
template <typename T, bool kSorted, int CW>
int32_t render_row(const RasterArgs<T>& a, int64_t cam, int r, int32_t start, int32_t n_list,
                FwdScratch<T>& s, const FwdOut<T>& o) {
  using V = typename Lanes<T>::V;
  using M = typename Lanes<T>::M;
  const int64_t CH = a.CH, n_vec = CH / kLanes, c_vec = n_vec * kLanes;
  constexpr bool sorted = kSorted;
  const int y = s.tile.y0 + r;
  const RowSegments<T> seg(s.tile.x0, s.tile.x1, y);
  const size_t cap = static_cast<size_t>(s.tile.row_start[r + 1] - s.tile.row_start[r]);
  if (s.list.size() < seg.n * cap) s.list.resize(seg.n * cap);
  if (s.w.size() < cap) s.w.resize(cap), s.rows.resize(cap), s.at.resize(cap), s.halves.resize(2 * cap);
  int32_t* const halves[2] = {s.halves.data(), s.halves.data() + cap};
  int count[kMaxSegments];
  seg.bucket(s.tile, r, s.list.data(), cap, count);
  const TileEntry<T>* kept = s.tile.kept.data();
  const T* bg = a.backgrounds ? a.backgrounds + cam * CH : nullptr;
  V* acc = s.acc.data();
  V* W = s.w.data();
  const T** R = s.rows.data();
  const auto row_of = s.feats.rows_of(CH);
  int32_t* I = s.at.data();
  M evals{}, useful{};
  int32_t reach = 0;
  for (int sg = 0; sg < seg.n; ++sg) {
    const int32_t* list = s.list.data() + sg * cap;
    const V px = seg.px[sg];
    Compositor<V, M, T> comp{sorted};
    M alive = seg.inside[sg];
    M stopped{};  // per lane, q + 1 of the pair it stopped at (0: not stopped)
    int nw = 0, q = 0;
    int32_t stop_at = n_list;
    for (; q < count[sg]; ++q) {
      const TileEntry<T>& e = kept[list[q]];
      const V al = e.row_alpha(seg.py)(px);
      V w;
      M stop;
      const M on = comp.take(alive & (al != T(0)), al, V{} + e.g.phi, w, stop);
      useful -= on;  // masks are −1: counts up
      // kept only when some lane contributes (the slot is overwritten otherwise); one fold
      // answers both "some lane on" (bit 0) and "some lane stops" (bit 1)
      const uint32_t any = lane_bits((on & 1) | (stop & 2));
      W[nw] = w, R[nw] = row_of(list[q]), I[nw] = e.i;
      nw += any & 1;
      if (sorted && (any & 2)) {  // rare: a pixel saturates here
        alive = mask_and_not(alive, stop);
        stopped = lane_select(stop, M{} + (q + 1), stopped);
        if (!any_lane(alive)) {
          stop_at = e.i + 1, ++q;
          break;
        }
      }
    }
    reach = std::max(reach, stop_at);
    // each lane was evaluated up to its stop, or over the q pairs scanned
    evals += seg.inside[sg] & lane_select(stopped != 0, stopped, M{} + q);
    const int sx = seg.first_pixel(sg), nvalid = seg.width(sg);
    const int64_t pix0 = (cam * a.height + y) * a.width + sx;
    T* const dst_seg = o.render + pix0 * CH;
    // (a segment at the image's right edge, or one not on a line boundary: stored in place)
    const bool stream =
        s.stream && nvalid == kLanes && (reinterpret_cast<uintptr_t>(dst_seg) & 63) == 0;
    T* const seg_out = stream ? s.stage.data() : dst_seg;
    // whole 8-channel vectors channel-major, straight into the pixels' outputs (or the stage)
    int n_half[2] = {0, 0};
    if (n_vec > 0) split_halves<T>(W, nw, halves, n_half);
    channel_vectors<T, CW>(W, R, halves, n_half, nvalid, c_vec, [&](int l, int64_t c,
                                                                    const auto& v) {
      using CV = std::decay_t<decltype(v)>;  // CW or 8 channels
      if (l >= nvalid) return;
      CV b{};
      if (bg) std::memcpy(&b, bg + c, sizeof(CV));
      const CV out = comp.lane(l).resolve(v, b, a.w_bg);
      std::memcpy(seg_out + l * CH + c, &out, sizeof(CV));
    });
    // the last CH mod 8 channels (all of them for RGB + depth) pixel-major
    segment_tail<T, kLanes - 1>(acc, W, R, nw, c_vec, static_cast<int>(CH - c_vec));
    s.listed += int64_t(stop_at) * nvalid;
    for (int l = 0; l < nvalid; ++l) {
      const int64_t pix = pix0 + l;
      T* dst = seg_out + l * CH;
      const Compositor<T> pc = comp.lane(l);
      for (int64_t c = c_vec; c < CH; ++c) dst[c] = pc.resolve(acc[c][l], bg ? bg[c] : T(0), a.w_bg);
      o.aux[pix] = pc.aux(a.w_bg);
      o.last_ids[pix] = sorted ? last_contributor(W, I, nw, l, start) : start + n_list;
      o.alphas[pix] = T(1) - pc.trans;
    }
    if (stream) stream_copy(dst_seg, s.stage.data(), kLanes * CH);
  }
  for (int i = 0; i < kLanes; ++i) s.computed += evals[i], s.useful += useful[i];
  return reach;
}

// One (camera, tile) task: its rows' Gaussians (TileRows) and their feature rows
// (TileFeatures), then row by row (CW: render_row's). Sorted mode reads the list in pieces, front
// to back, as far as its pixels need: where the image saturates (T < 1e-4) the pairs behind are
// never read, the α ≥ 1/255 test, row masks and feature copy of most of a dense tile's list
// included. A first piece sized from the previous tile's need (s.reach), then doubled until every
// segment saturated inside what was added, or the list ends; each try renders the rows again from
// the first, over the same entries a whole build keeps, so the images are those of one whole pass.
template <typename T, int CW>
void render_tile(const RasterArgs<T>& a, const RowGaussian<T>* gs, int64_t cam, int tx, int ty,
                 int32_t start, int32_t end, FwdScratch<T>& s, const FwdOut<T>& o) {
  TileRows<T>& tr = s.tile;
  const int32_t n = end - start;
  tr.begin(a, tx, ty);
  int32_t added = 0;
  // the first piece: the previous tile's share with a quarter to spare, and at least a few
  // dozen pairs (neighbouring tiles' needs differ; a retry re-renders the rows)
  int32_t upto = a.sorted ? int32_t(std::min<int64_t>(n, int64_t(s.reach * 1.25 * n) + 64)) : n;
  const bool in_place = TileFeatures<T>::in_place(a.CH);
  for (;;) {
    const size_t had = tr.kept.size();
    tr.add(a, gs, start, added, upto, /*prefetch_features=*/in_place);
    tr.index_rows();
    s.feats.gather(a, tr, in_place, had);
    added = upto;
    s.listed = s.computed = s.useful = 0;
    int32_t reach = 0;
    for (int r = 0; r <= tr.y1 - tr.y0 && reach <= added; ++r)
      reach = std::max(reach, a.sorted ? render_row<T, true, CW>(a, cam, r, start, n, s, o)
                                       : render_row<T, false, CW>(a, cam, r, start, n, s, o));
    if (reach <= added) {  // every pixel done inside the entries added (always when added = n)
      s.reach = n > 0 ? double(reach) / n : s.reach;
      return;
    }
    upto = std::min<int64_t>(n, 2 * int64_t(upto));
  }
}

// The 3DGS/gsplat-style baseline: one pixel at a time over the whole tile list, channel loop
// per Gaussian. Sorted mode only (weighted uses the matrix path).
template <typename T>
void render_tile_scalar(const RasterArgs<T>& a, int64_t cam, int tx, int ty, int32_t start,
                        int32_t end, const std::vector<TileGaussian<T>>& gs,
                        const FwdOut<T>& o) {
  const int64_t CH = a.CH;
  const T* bg = a.backgrounds ? a.backgrounds + cam * CH : nullptr;
  const int x0 = tx * a.tile_size, y0 = ty * a.tile_size;
  for (int y = y0; y < std::min(y0 + a.tile_size, a.height); ++y)
    for (int x = x0; x < std::min(x0 + a.tile_size, a.width); ++x) {
      const int64_t pix = (cam * a.height + y) * a.width + x;
      T* dst = o.render + pix * CH;
      std::fill(dst, dst + CH, T(0));
      Compositor<T> comp{true};
      int32_t last = start;
      const T px = x + T(0.5), py = y + T(0.5);
      for (int32_t i = 0; i < end - start; ++i) {
        const TileGaussian<T>& g = gs[i];
        const T alpha =
            pair_alpha<T>(g.opacity, gaussian_sigma<T>(g.a, g.b, g.c, g.mx - px, g.my - py));
        if (alpha == T(0)) continue;
        T wgt;
        if (!comp.take(alpha, T(0), &wgt)) break;
        const T* f = a.colors + static_cast<int64_t>(g.id) * CH;
        for (int64_t c = 0; c < CH; ++c) dst[c] += wgt * f[c];
        last = start + i + 1;
      }
      for (int64_t c = 0; c < CH; ++c) dst[c] = comp.resolve(dst[c], bg ? bg[c] : T(0), T(0));
      o.alphas[pix] = T(1) - comp.trans;
      o.aux[pix] = comp.aux(T(0));
      o.last_ids[pix] = last;
    }
}

}  // namespace

template <typename T>
void rasterize_fwd_tiles(const RasterArgs<T>& a, const FwdOut<T>& o, RowGaussian<T>* gs,
                         int64_t n_tiles) {
  const bool scalar = gs == nullptr;
  const int64_t CH = a.CH;
  const size_t render_bytes = size_t(a.C) * a.height * a.width * CH * sizeof(T);
  int64_t* st = o.stats;
  const int64_t tiles_per_cam = int64_t(a.TH) * a.TW;
  if (!scalar) prepare_gaussians(a, gs);
  // 16-channel vectors where the copy that runs has the registers for them and CH has one
  // (below 16 channels, RGB + depth included, the narrow instantiation runs, unchanged)
  const bool wide = wide_vectors(active_isa()) && CH >= kWideChannels<T>;
  cpu::parallel_tasks(n_tiles, [&](const auto& take) {
    FwdScratch<T> s;
    std::vector<TileGaussian<T>> list;  // the scalar baseline's tile list
    s.acc.resize(CH);
    // renders of kStreamMin bytes: each segment's pixels composed in s.stage, then streamed
    // out (stream_store.h), when the segment is whole lines (8·CH values: CH even for float)
    s.stream = render_bytes >= size_t(kStreamMin) && (kLanes * CH * sizeof(T)) % 64 == 0;
    if (s.stream) s.stage.resize(kLanes * CH);
    for (int64_t t; (t = take()) < n_tiles;) {
      const int64_t cam = t / tiles_per_cam;
      const int ty = (t % tiles_per_cam) / a.TW, tx = t % a.TW;
      const int32_t start = a.tile_start(t), stop = a.tile_end(t);
      if (scalar) {
        gather_tile(a, start, stop, list);
        render_tile_scalar(a, cam, tx, ty, start, stop, list, o);
        continue;
      }
      wide ? render_tile<T, kWideChannels<T>>(a, gs, cam, tx, ty, start, stop, s, o)
           : render_tile<T, kLanes>(a, gs, cam, tx, ty, start, stop, s, o);
      atomic_add<int64_t>(st + 3 * cam + 0, s.listed);
      atomic_add<int64_t>(st + 3 * cam + 1, s.computed);
      atomic_add<int64_t>(st + 3 * cam + 2, s.useful);
    }
    _mm_sfence();  // the streamed lines visible before the outputs are returned
  });
}

template void rasterize_fwd_tiles<float>(const RasterArgs<float>&, const FwdOut<float>&,
                                         RowGaussian<float>*, int64_t);
template void rasterize_fwd_tiles<double>(const RasterArgs<double>&, const FwdOut<double>&,
                                          RowGaussian<double>*, int64_t);

}  // namespace cpu
}  // namespace gsrender
