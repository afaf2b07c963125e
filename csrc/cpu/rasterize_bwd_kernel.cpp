// CPU backward rasterizer (docs/design.md §4 backward), on the forward's 8-pixel row segments:
// per tile row and segment, v_W = G·F for the segment's pairs as a register-blocked product
// (gemm.h), then one front-to-back walk recomputing the forward's α and transmittance and taking
// each pair's v_A (the suffix sum from the forward output's share, composite.h kFrontToBack) and
// the elementwise chain to the 2D parameters as vectors over the pixels, then v_F += Wᵀ·G.
// Per-tile partial gradients are reduced locally and added to the outputs once per (tile,
// Gaussian), with no atomics (backward_chunked: the same bits run to run for a given thread
// count); with deterministic=true they go to per-entry rows instead and a fixed-order reduction
// sums them (gsrender/det_reduce.h), so the result is the same bit for bit whatever the thread
// count.
// This file is the kernel, torch-free; rasterize_bwd.cpp is the op (checks, outputs, the
// deterministic reduction's plan).
#include "pixel_contraction.h"  // first: it sets the compile options of all that follows
#include "rasterize_bwd_kernel.h"

#include <atomic>

#include "gemm.h"
#include "gsrender/composite.h"
#include "isa.h"
#include "raster_tile.h"
#include "row_tile.h"

namespace gsrender {
namespace cpu {
namespace {

template <typename T>
struct BwdScratch {
  using V = typename Lanes<T>::V;
  TileRows<T> tile;
  TileFeatures<T> feats;         // the tile's kept feature rows (row k: kept entry k)
  int32_t n = 0;                 // the tile's list length
  int64_t chp = 0;               // CH rounded up to whole CW vectors: the stride of g and v_color
  std::vector<int32_t> list;     // [segments, cap]: a row's tile entries per segment
  // One segment's pairs up to its last contributor ([cap]): their feature rows and dL/dw = G·f
  // per pixel; its contributing pairs' weights and rows of v_color, for v_F += Wᵀ·G.
  std::vector<const T*> ent_rows;
  LaneVector<V> ent_v_w, ent_w;
  std::vector<T*> ent_v_rows;
  LineVector<T> g;               // [segments, 8, chp] upstream gradient per pixel (pixel-major)
  LaneVector<V> gt;              // [segments, CH] the same, channel-major (pair_dots)
  LaneVector<typename PairLanes<T>::V> g2;  // [segments, pairs(CH)] or in channel pairs
  // The AVX-512 copy from kWideChannels channels: g2 (pair_dots_paired) and pair_outer's
  // channels in kWideChannels vectors (16 floats, 8 doubles); else gt and 8-channel vectors.
  bool wide = false;
  // Per kept entry k (tile.kept's order): what the tile's pairs add to its gradients.
  LaneVector<V> part;            // [kept, kGradFields]: the α-chain sums, lane-wise
  LineVector<T> v_color;         // [kept, chp] (line-aligned: pair_outer's vector RMWs)
  std::vector<char> touched;     // [kept]
  // The touched kept entries, in list order, and their 2D-parameter sums packed in one vector
  // (det_pass.h's field order, lane 7 zero), for the outputs.
  std::vector<int32_t> done;
  LaneVector<V> sum2d;
  std::vector<T> v_bg;                // [CH]
};

// Lane-wise partial sums per tile-list entry: the moments of g = dL/dσ = −v_α·α over its pixels'
// offsets d = (dx, dy) from the mean (Σg, Σg·dx, Σg·dx², Σg·dy, Σg·dx·dy, Σg·dy²) and, weighted,
// dL/dz. AlphaGrad's fields follow from them once per entry (backward_tile): dL/dmean =
// Q·(Σg·d), dL/dconic = ½·(Σg·dx², 2·Σg·dx·dy, Σg·dy²), dL/do = −Σg / o. Six sums either way,
// but a pair's share is 7 vector operations, not 11: the conic's terms are not formed per pixel.
enum { kG, kGx, kGxx, kGy, kGxy, kGyy, kGZ, kGradFields };
static_assert(kDetMeanX == 0 && kDetMeanY == 1 && kDetConicA == 2 && kDetConicB == 3 &&
                  kDetConicC == 4 && kDetOpacity == 5 && kDetDepth == 6 && kDetFields <= kLanes,
              "BwdScratch::sum2d and packed: det_pass.h's fields in order, in one vector");

// One image row of a tile, backward, one walk per segment: dL/dw = G·f for the segment's pairs
// up to its last contributor (a register-blocked product, gemm.h), then the pairs front to back
// recompute α and the transmittance as the forward did (8 pixels a vector, each lane up to its
// last contributor) and take their gradients on the way: the suffix sum runs front to back from
// S_total, the forward output's share (CompositorGrad kFrontToBack), so no pair is stored for a
// second walk back; then v_F += Wᵀ·G over the contributing pairs (gemm.h).
template <typename T>
void backward_row(const RasterArgs<T>& a, int64_t cam, int y, int32_t start, const int32_t* items, int n_items,
                  BwdScratch<T>& s, const RasterBwdIO<T>& io) {
  const int64_t chp = s.chp;
  using V = typename Lanes<T>::V;
  using M = typename Lanes<T>::M;
  using Grad = CompositorGrad<V, T, /*kFrontToBack=*/true>;
  const int64_t CH = a.CH;
  const bool sorted = a.sorted;
  const RowSegments<T> seg(s.tile.x0, s.tile.x1, y);
  const int nseg = seg.n;
  const T* bg = a.backgrounds ? a.backgrounds + cam * CH : nullptr;
  Grad grad[kMaxSegments];
  M last[kMaxSegments];
  s.g.assign(size_t(nseg) * kLanes * chp, T(0));
  const int64_t npairs = PairLanes<T>::pairs(CH);
  if (s.wide)
    s.g2.assign(size_t(nseg) * npairs, typename PairLanes<T>::V{});
  else
    s.gt.assign(size_t(nseg) * CH, V{});
  for (int sg = 0; sg < nseg; ++sg) {
    const int sx = seg.first_pixel(sg), nvalid = seg.width(sg);
    grad[sg] = {sorted};
    last[sg] = M{};
    for (int l = 0; l < nvalid; ++l) {
      const int64_t pix = (cam * a.height + y) * a.width + sx + l;
      T* gp = s.g.data() + (size_t(sg) * kLanes + l) * chp;
      const T* vr = io.v_render + pix * CH;
      const T* out = io.render + pix * CH;
      last[sg][l] = io.last_ids[pix] - start;
      CompositorGrad<T, T, true> pg{sorted};
      pg.start(io.aux[pix], io.alphas[pix], io.v_alphas[pix]);
      for (int64_t c = 0; c < CH; ++c) gp[c] = pg.gradient(vr[c]);
      pg.add_seed(lane_dot(gp, out, CH));
      if (s.wide) {  // channels 2j, 2j + 1: pair j, lanes 2l, 2l + 1 (an odd CH's last pair
                     // ends in gp's zero padding)
        T* g2 = reinterpret_cast<T*>(s.g2.data() + size_t(sg) * npairs) + 2 * l;
        for (int64_t c = 0; c < CH; c += 2) std::memcpy(g2 + c * kLanes, gp + c, 2 * sizeof(T));
      } else {
        V* gt = s.gt.data() + size_t(sg) * CH;
        for (int64_t c = 0; c < CH; ++c) gt[c][l] = gp[c];
      }
      // (v_backgrounds is only returned with backgrounds: no per-pixel sums without them)
      if (bg)
        for (int64_t c = 0; c < CH; ++c) s.v_bg[c] += pg.v_bg(vr[c], a.w_bg);
      pg.seal();
      grad[sg].set_lane(l, pg);
    }
    if (!sorted) last[sg] = seg.inside[sg] & (M{} + s.n);  // weighted: every listed Gaussian
  }
  const size_t cap = static_cast<size_t>(n_items);
  if (s.list.size() < nseg * cap) s.list.resize(nseg * cap);
  if (s.ent_rows.size() < cap)
    s.ent_rows.resize(cap), s.ent_v_w.resize(cap), s.ent_w.resize(cap), s.ent_v_rows.resize(cap);
  int count[kMaxSegments];
  seg.bucket(s.tile, y - s.tile.y0, s.list.data(), cap, count);
  const auto row_of = s.feats.rows_of(CH);
  const TileEntry<T>* kept = s.tile.kept.data();
  const size_t nk = s.tile.kept.size();
  V* const v_ws = s.ent_v_w.data();
  V* const ws = s.ent_w.data();
  const T** const rows = s.ent_rows.data();
  T** const v_rows = s.ent_v_rows.data();
  for (int sg = 0; sg < nseg; ++sg) {
    const int32_t* list = s.list.data() + sg * cap;
    int32_t end = 0;  // past every lane's last contributor (last = 0 on invalid lanes)
    for (int l = 0; l < kLanes; ++l) end = std::max<int32_t>(end, int32_t(last[sg][l]));
    // the segment's pairs up to it and dL/dw = G·f for each: kept and the buckets are in list
    // order, so those are the bucket's entries before the first kept one at or past it (two
    // searches, not a test per entry on a value read at random)
    const int32_t k_end = int32_t(std::partition_point(kept, kept + nk, [end](const TileEntry<T>& e) {
                                    return e.i < end;
                                  }) - kept);
    const int nq = int(std::lower_bound(list, list + count[sg], k_end) - list);
    for (int q = 0; q < nq; ++q) rows[q] = row_of(list[q]);
    if (s.wide)
      pair_dots_paired<T>(v_ws, rows, s.g2.data() + size_t(sg) * npairs, CH, nq);
    else
      pair_dots<T>(v_ws, rows, s.gt.data() + size_t(sg) * CH, CH, nq);
    Compositor<V, M, T> comp{sorted};
    Grad gr = grad[sg];  // (a copy: its suffix sum stays in a register across the walk)
    int ne = 0;  // the contributing pairs' weights and v_color rows, for v_F += Wᵀ·G
    for (int q = 0; q < nq; ++q) {
      const int32_t kk = list[q];
      const TileEntry<T>& en = kept[kk];
      const RowGaussian<T>& g = en.g;
      const M live = (M{} + en.i) < last[sg];
      const V raw = en.row_alpha(seg.py)(seg.px[sg]);
      const M on = live & (raw != T(0));
      if (!any_lane(on)) continue;
      const V al = on ? raw : V{};  // 0 where the lane does not contribute
      const V t_before = comp.trans;
      const V phi = V{} + g.phi;
      const V w = comp.advance(on, al, phi);
      ws[ne] = w, v_rows[ne] = s.v_color.data() + static_cast<int64_t>(kk) * chp, ++ne;
      s.touched[kk] = 1;
      V* part = s.part.data() + size_t(kk) * kGradFields;
      V net{};  // weighted only
      const V v_al = gr.step(al, t_before, w, v_ws[q], phi, &net);
      if (!sorted) part[kGZ] += on ? net * al : V{};
      // AlphaGrad::add as vectors: nothing flows where α was clamped at 0.99
      if (!(g.opacity > T(0))) continue;
      const M flows = on & (al < T(kAlphaMax));
      const V dx = g.mx - seg.px[sg];
      const T dy = g.my - seg.py;
      const V v_sigma = flows ? -v_al * al : V{};
      const V v_dx = v_sigma * dx;
      part[kG] += v_sigma;
      part[kGx] += v_dx;
      part[kGxx] += v_dx * dx;
      part[kGy] += v_sigma * dy;
      part[kGxy] += v_dx * dy;
      part[kGyy] += v_sigma * (dy * dy);
    }
    const T* wf = reinterpret_cast<const T*>(ws);
    const T* gs = s.g.data() + size_t(sg) * kLanes * chp;
    if (s.wide)
      pair_outer<T, kWideChannels<T>>(v_rows, wf, gs, chp, ne);
    else
      pair_outer<T, kLanes>(v_rows, wf, gs, chp, ne);
  }
}

// The end of the tile's list that its pixels read: past every pixel's last contributor (last_ids
// is one past it), at least start.
template <typename T>
int32_t last_reach(const RasterArgs<T>& a, const RasterBwdIO<T>& io, int64_t cam, int tx, int ty,
                   int32_t start) {
  const PixelBox px = tile_pixels(tx, ty, a.tile_size, a.width, a.height);
  int32_t reach = start;
  for (int y = px.y0; y <= px.y1; ++y) {
    const int32_t* l = io.last_ids + (cam * a.height + y) * a.width;
    for (int x = px.x0; x <= px.x1; ++x) reach = std::max(reach, l[x]);
  }
  return reach;
}

// One (camera, tile) task: the touched kept entries' sums in s.done / s.sum2d / s.v_color and
// the tile's v_backgrounds share added to s.v_bg.
template <typename T>
void backward_tile(const RasterArgs<T>& a, const RowGaussian<T>* gs, const RasterBwdIO<T>& io,
                   int64_t t, BwdScratch<T>& s) {
  using V = typename Lanes<T>::V;
  const int64_t tiles_per_cam = int64_t(a.TH) * a.TW;
  const int64_t cam = t / tiles_per_cam;
  const int ty = (t % tiles_per_cam) / a.TW, tx = t % a.TW;
  const int32_t start = a.tile_start(t);
  s.n = a.tile_end(t) - start;
  // Sorted: no pixel reads the list past its last contributor, so the tile's set-up stops at the
  // deepest one (the forward read it only that far too: "Sorted lists in pieces", docs/cpu.md).
  const int32_t stop = a.sorted ? last_reach(a, io, cam, tx, ty, start) : a.tile_end(t);
  const bool place = TileFeatures<T>::in_place(a.CH);  // as the forward (row_tile.h)
  s.tile.build(a, gs, tx, ty, start, stop, /*prefetch_features=*/place);
  s.feats.gather(a, s.tile, place);
  const size_t nk = s.tile.kept.size();
  s.part.assign(nk * kGradFields, V{});
  s.v_color.assign(nk * s.chp, T(0));
  s.touched.assign(nk, 0);
  const std::vector<int32_t>& rs = s.tile.row_start;
  for (int r = 0; r + s.tile.y0 <= s.tile.y1; ++r)
    backward_row(a, cam, s.tile.y0 + r, start, s.tile.items.data() + rs[r], rs[r + 1] - rs[r],
                 s, io);
  // The lanes summed per touched entry, from the tile's own copy of the Gaussian (the frame's
  // array is read at random by id: a cache miss per entry).
  s.done.clear(), s.sum2d.clear();
  for (size_t k = 0; k < nk; ++k) {
    if (!s.touched[k]) continue;
    const V* p = s.part.data() + k * kGradFields;
    const TileEntry<T>& en = s.tile.kept[k];
    const T o = en.g.opacity;  // (nothing was added where o <= 0)
    const T v_depth = a.sorted ? T(0)
                               : lane_sum(p[kGZ]) * depth_weight_dz<T>(a.depths[en.id], en.g.phi,
                                                                       a.sigma_w, a.beta);
    s.done.push_back(int32_t(k));
    const T gx = lane_sum(p[kGx]), gy = lane_sum(p[kGy]);
    const RowGaussian<T>& g = en.g;
    // dα/do = α/o = −dα/dσ / o: the 1/o once per entry
    s.sum2d.push_back(V{g.a * gx + g.b * gy, g.b * gx + g.c * gy, T(0.5) * lane_sum(p[kGxx]),
                        lane_sum(p[kGxy]), T(0.5) * lane_sum(p[kGyy]),
                        o > T(0) ? -lane_sum(p[kG]) / o : T(0), v_depth});
  }
}

template <typename T>
BwdScratch<T> make_scratch(int64_t CH) {
  BwdScratch<T> s;
  s.v_bg.assign(CH, T(0));
  s.wide = wide_vectors(active_isa()) && CH >= kWideChannels<T>;
  const int64_t cw = s.wide ? kWideChannels<T> : kLanes;
  s.chp = (CH + cw - 1) / cw * cw;
  return s;
}

// For each Gaussian g the first and last of the chunks (tiles [tb[w], tb[w + 1])) that can touch
// it: those holding the first and last tile, in row-major order, of its support box clipped to
// the image. A tile's set-up keeps g only where the box meets the tile (support_meets_tile), so
// no other chunk touches it, whatever the lists hold. One pass over the Gaussians, from
// prepare_gaussians' boxes, where reading every list entry (at random, by id) took 2.2 ms at
// 100k Gaussians and 20 ms at 1M; tables, not a division and a search per Gaussian, which cost
// more than the rest of the pass. Gaussians no pixel sees get chunk 0 for both.
template <typename T>
void chunk_span(const RasterArgs<T>& a, const RowGaussian<T>* gs, const std::vector<int64_t>& tb,
                HostVector<int32_t>& first, HostVector<int32_t>& last) {
  const int64_t tiles_per_cam = int64_t(a.TH) * a.TW, G = a.C * a.N;
  std::vector<int32_t> col(a.width), row(a.height), chunk_of(a.C * tiles_per_cam);
  for (int x = 0; x < a.width; ++x) col[x] = x / a.tile_size;
  for (int y = 0; y < a.height; ++y) row[y] = y / a.tile_size * a.TW;
  for (size_t w = 0; w + 1 < tb.size(); ++w)
    for (int64_t t = tb[w]; t < tb[w + 1]; ++t) chunk_of[t] = int32_t(w);
  first.resize(G), last.resize(G);
  cpu::parallel_for(0, G, 2048, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1;) {
      const int64_t cam = g / a.N, cam_end = std::min(g1, (cam + 1) * a.N);
      const int32_t* cam_chunk = chunk_of.data() + cam * tiles_per_cam;
      for (; g < cam_end; ++g) {
        const RowGaussian<T>& q = gs[g];
        const int x0 = std::max(q.box.x0, 0), x1 = std::min(q.box.x1, a.width - 1);
        const int y0 = std::max(q.box.y0, 0), y1 = std::min(q.box.y1, a.height - 1);
        const bool unseen = !(q.bound > -INFINITY) || x0 > x1 || y0 > y1;
        first[g] = unseen ? 0 : cam_chunk[row[y0] + col[x0]];
        last[g] = unseen ? 0 : cam_chunk[row[y1] + col[x1]];
      }
    }
  });
}


}  // namespace

template <typename T>
void prepare_bwd_gaussians(const RasterArgs<T>& a, RowGaussian<T>* gs) {
  prepare_gaussians(a, gs);
}

// The default reduction, with no atomics: the tiles are split into contiguous chunks (one with
// one thread, 4 per thread otherwise) holding about the same number of list entries (a chunk's
// entries are one contiguous run of flatten_ids). A Gaussian only one chunk can touch
// (chunk_span) is summed straight into v_colors and
// its row of `packed` (its 2D-parameter fields, det_pass.h's order, in one vector: one cache line
// per entry where five output arrays cost five random lines) by the thread running it, tile by
// tile; one several chunks can touch (a chunk boundary crosses its box) gets a row per chunk in
// `shared` ([rows, kDetFields + CH], det_pass.h's layout), summed in chunk order at the end, when
// `packed` is unpacked into the outputs. For a given thread count every sum has a fixed order, so
// repeated runs agree bit for bit (gradcheck's reentrancy check); deterministic=true is also
// independent of the thread count. Memory: one vector (8 values) per Gaussian, two int32 and one
// int64 more with several threads, plus the boundary Gaussians' rows.
template <typename T>
bool backward_chunked(const RasterArgs<T>& a, const RowGaussian<T>* gs, const RasterBwdIO<T>& io) {
  const int64_t CH = a.CH, tiles_per_cam = int64_t(a.TH) * a.TW, n_tiles = a.C * tiles_per_cam;
  const int64_t G = a.C * a.N, stride = kDetFields + CH;
  // Several chunks per thread, handed out one at a time (cpu::parallel_tasks), so a thread that
  // is slowed (a dense stretch, or a shared machine) does not hold up the others; the chunks and
  // so every sum's order depend on the thread count only.
  constexpr int64_t kChunksPerThread = 4;
  const int64_t threads = num_threads();
  const int64_t W = std::clamp<int64_t>(threads > 1 ? kChunksPerThread * threads : 1, 1,
                                        std::max<int64_t>(n_tiles, 1));
  std::vector<int64_t> tb(W + 1, n_tiles);  // chunk w: tiles [tb[w], tb[w + 1])
  tb[0] = 0;
  for (int64_t w = 1; w < W; ++w) {
    const int64_t target = a.M * w / W;
    int64_t lo = tb[w - 1], hi = n_tiles;  // first tile starting at or after the target
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (a.tile_start(mid) < target) lo = mid + 1; else hi = mid;
    }
    tb[w] = lo;
  }
  // The first and last chunk that can touch each Gaussian; for one several can, chunk w's row
  // of `shared` is base[g] − W + w (> 0); base[g] = −1 − w for one only chunk w can touch,
  // summed straight into the outputs. The tasks check that it is w that touches such a one, and
  // that a shared row is inside `shared` (a row of another Gaussian fails the gradient tests).
  HostVector<int32_t> first, last;  // (per-Gaussian arrays: cached blocks, HostAlloc)
  HostVector<int64_t> base;
  int64_t n_rows = 0;
  if (W > 1) {
    chunk_span(a, gs, tb, first, last);
    base.resize(G);
    // the rows in Gaussian order: a count per block of Gaussians, their prefix, then the bases
    constexpr int64_t kBlock = 4096;
    const int64_t n_blocks = (G + kBlock - 1) / kBlock;
    std::vector<int64_t> rows(n_blocks + 1, 0);  // rows[b + 1]: block b's, then the prefix
    const auto span_rows = [&](int64_t g) { return first[g] < last[g] ? last[g] - first[g] + 1 : 0; };
    const auto blocks = [&](auto&& fn) {
      cpu::parallel_for(0, n_blocks, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) fn(b, b * kBlock, std::min(G, (b + 1) * kBlock));
      });
    };
    blocks([&](int64_t b, int64_t g0, int64_t g1) {
      int64_t n = 0;
      for (int64_t g = g0; g < g1; ++g) n += span_rows(g);
      rows[b + 1] = n;
    });
    for (int64_t b = 0; b < n_blocks; ++b) rows[b + 1] += rows[b];
    n_rows = rows.back();
    blocks([&](int64_t b, int64_t g0, int64_t g1) {
      for (int64_t g = g0, r = rows[b]; g < g1; ++g) {
        const int64_t n = span_rows(g);
        base[g] = n ? r + W - first[g] : -1 - first[g], r += n;
      }
    });
  }
  HostVector<T> shared(size_t(n_rows) * stride, T(0));
  using V = typename Lanes<T>::V;
  LaneVector<V> packed(G, V{});  // [G]: the one-chunk Gaussians' 2D-parameter fields
  std::vector<T> bg(size_t(W) * a.C * CH, T(0));  // [W, C, CH]: each chunk's v_backgrounds
  std::atomic<bool> misplaced{false};  // a chunk touched a Gaussian chunk_span did not give it
  cpu::parallel_tasks(W, [&](const auto& take) {
    BwdScratch<T> s = make_scratch<T>(CH);
    for (int64_t w; (w = take()) < W;) {
      for (int64_t t = tb[w]; t < tb[w + 1]; ++t) {
        backward_tile(a, gs, io, t, s);
        T* v_bg = bg.data() + (w * a.C + t / tiles_per_cam) * CH;
        for (int64_t c = 0; c < CH; ++c) v_bg[c] += s.v_bg[c], s.v_bg[c] = T(0);
        const size_t n_done = s.done.size();
        for (size_t j = 0; j < n_done; ++j) {
          // The ids are in depth order, so the outputs are written at random: fetch ahead.
          constexpr size_t kAhead = 8;
          if (j + kAhead < n_done) {
            const int64_t id = s.tile.kept[s.done[j + kAhead]].id;
            __builtin_prefetch(&packed[id], 1);
            if (W > 1) __builtin_prefetch(&base[id]);
            const char* f = reinterpret_cast<const char*>(io.v_colors + id * CH);
            for (size_t b = 0; b < size_t(CH) * sizeof(T); b += 64) __builtin_prefetch(f + b, 1);
          }
          const int32_t k = s.done[j];
          const int64_t id = s.tile.kept[k].id;
          const V& g = s.sum2d[j];
          const T* d = s.v_color.data() + k * s.chp;
          if (W == 1 || base[id] < 0) {  // this chunk's alone
            if (W > 1 && base[id] != -1 - w) misplaced.store(true, std::memory_order_relaxed);
            packed[id] += g;
            T* dst = io.v_colors + id * CH;
            for (int64_t c = 0; c < CH; ++c) dst[c] += d[c];
          } else {
            const int64_t row = base[id] - W + w;
            if (row < 0 || row >= n_rows) {
              misplaced.store(true, std::memory_order_relaxed);
              continue;
            }
            T* r = shared.data() + row * stride;
            for (int f = 0; f < kDetFields; ++f) r[f] += g[f];
            for (int64_t c = 0; c < CH; ++c) r[kDetFields + c] += d[c];
          }
        }
      }
    }
  });
  const DetOut<T> out{io.v_means2d, io.v_conics, io.v_opacities, io.v_colors, io.v_depths, CH};
  const DetPass all = det_pass(std::max<int64_t>(CH, 1), 0, CH);
  cpu::parallel_for(0, G, 2048, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      if (n_rows && first[g] < last[g]) {  // the chunks' rows, in chunk order
        for (int64_t f = 0; f < stride; ++f)
          *det_slot(out, all, g, f) =
              det_column_sum<T>(shared.data(), stride, nullptr, base[g] - W + first[g],
                                base[g] - W + last[g] + 1, f);
        continue;
      }
      const V& f = packed[g];
      io.v_means2d[2 * g] = f[0], io.v_means2d[2 * g + 1] = f[1];
      io.v_conics[3 * g] = f[2], io.v_conics[3 * g + 1] = f[3], io.v_conics[3 * g + 2] = f[4];
      io.v_opacities[g] = f[5], io.v_depths[g] = f[6];
    }
  });
  for (int64_t cam = 0; cam < a.C; ++cam)
    for (int64_t c = 0; c < CH; ++c)
      io.v_backgrounds[cam * CH + c] = det_column_sum<T>(bg.data(), a.C * CH, nullptr, 0, W, cam * CH + c);
  return !misplaced.load();
}

// deterministic=true (gsrender/det_reduce.h), one pass: every tile writes its entries' rows of
// part (and, first pass, its v_backgrounds row), then each Gaussian's rows are summed in entry
// order. Untouched entries keep part's zeros.
template <typename T>
void backward_det_pass(const RasterArgs<T>& a, const RowGaussian<T>* gs, const RasterBwdIO<T>& io,
                       const DetPass& ps, const int64_t* order, const int64_t* seg, T* part,
                       T* bg_part) {
  const int64_t CH = a.CH, n_tiles = a.C * int64_t(a.TH) * a.TW, G = a.C * a.N;
  const DetOut<T> out{io.v_means2d, io.v_conics, io.v_opacities, io.v_colors, io.v_depths, CH};
  cpu::parallel_tasks(n_tiles, [&](const auto& take) {
    BwdScratch<T> s = make_scratch<T>(CH);
    for (int64_t t; (t = take()) < n_tiles;) {
      backward_tile(a, gs, io, t, s);
      if (bg_part)
        for (int64_t c = 0; c < CH; ++c) bg_part[t * CH + c] = s.v_bg[c];
      std::fill(s.v_bg.begin(), s.v_bg.end(), T(0));
      const int64_t start = a.tile_start(t);
      for (size_t j = 0; j < s.done.size(); ++j) {
        const int32_t k = s.done[j];
        T* row = part + (start + int64_t(s.tile.kept[k].i)) * ps.stride;
        for (int f = 0; f < kDetFields; ++f) row[f] = s.sum2d[j][f];
        const T* d = s.v_color.data() + k * s.chp + ps.c0;
        std::copy(d, d + ps.nc, row + kDetFields);
      }
    }
  });
  cpu::parallel_for(0, G, 256, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t f = 0; f < ps.stride; ++f) det_reduce_one(out, ps, part, order, seg, g, f);
  });
}

template <typename T>
void det_backgrounds(const RasterArgs<T>& a, const T* bg_part, const RasterBwdIO<T>& io) {
  const int64_t CH = a.CH, per_cam = int64_t(a.TH) * a.TW;
  for (int64_t cam = 0; cam < a.C; ++cam)
    for (int64_t c = 0; c < CH; ++c)
      io.v_backgrounds[cam * CH + c] =
          det_column_sum<T>(bg_part, CH, nullptr, cam * per_cam, (cam + 1) * per_cam, c);
}

#define GSR_RASTERIZE_BWD_KERNEL(T)                                                               \
  template void prepare_bwd_gaussians<T>(const RasterArgs<T>&, RowGaussian<T>*);                 \
  template bool backward_chunked<T>(const RasterArgs<T>&, const RowGaussian<T>*,                 \
                                    const RasterBwdIO<T>&);                                       \
  template void backward_det_pass<T>(const RasterArgs<T>&, const RowGaussian<T>*,                \
                                     const RasterBwdIO<T>&, const DetPass&, const int64_t*,       \
                                     const int64_t*, T*, T*);                                     \
  template void det_backgrounds<T>(const RasterArgs<T>&, const T*, const RasterBwdIO<T>&);
GSR_RASTERIZE_BWD_KERNEL(float)
GSR_RASTERIZE_BWD_KERNEL(double)
#undef GSR_RASTERIZE_BWD_KERNEL

}  // namespace cpu
}  // namespace gsrender
