// The row rasterizer's tile setup, shared by the CPU forward and backward: every Gaussian's
// per-frame constants once (not once per tile pair), and per (camera, tile) the Gaussians whose
// support ellipse meets the tile (the exact test of gsrender/support_ellipse.h, not the box),
// bucketed by the tile rows their support box covers, in list (depth) order.
#pragma once
#include "isa.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "gsrender/raster_args.h"
#include "gsrender/support_ellipse.h"
#include "gsrender/tiles.h"
#include "lanes.h"
#include "support_lanes.h"

namespace gsrender {
namespace cpu {

constexpr int kMaxSegments = 256 / kLanes;  // 8-pixel row segments per tile row (tile_size <= 256)

// One Gaussian as the row rasterizer reads it, computed once per frame (not per tile pair): its
// support (gsrender/support_ellipse.h: mean, conic, ln(255·o), the pixels it can reach with
// α ≥ 1/255), opacity and the weighted mode's depth weight φ(z). (64 bytes at float: one
// Gaussian is one cache line's worth of the tile set-up's random reads.)
template <typename T>
struct RowGaussian : Support<T> {
  T opacity, phi;
  double bound;  // support_rect_bound: the tile test's bound on dᵀQd, −∞ when no pixel contributes

};


// The row segments of rows y .. y + n − 1 (pixels [x0, x1], 8-pixel segments from x0) that g's
// support ellipse crosses: bit sg of out[j] is set when dᵀQd ≤ bound somewhere on row y + j's
// pixel-centre interval of segment sg inside g's support box (the clamped parabola vertex of
// support_edge_min, continuous in x, so it never misses a pixel centre the tile test and the
// kernels would light; a segment whose bit is clear has no lane with α ≥ 1/255). Four rows at a
// time in double vectors: no square root, no branch per row. count[j] gains 1 for each row j the
// ellipse crosses (some bit set), while the masks are still in registers.
template <typename T>
void row_masks(const RowGaussian<T>& g, int x0, int x1, int y, int n, uint32_t* out,
               int32_t* count) {
  typedef double d4 __attribute__((vector_size(32)));
  typedef int64_t l4 __attribute__((vector_size(32)));
  const double a = g.a, b2 = 2.0 * double(g.b), c = g.c, mx = g.mx, my = g.my;
  const double k = -double(g.b) / a;  // the vertex dx = k·dy of each row's parabola
  const int sx0 = std::max(g.box.x0, x0), sx1 = std::min(g.box.x1, x1);
  const int sg0 = (sx0 - x0) / kLanes, sg1 = sx1 < sx0 ? -1 : (sx1 - x0) / kLanes;
  for (int j = 0; j < n; j += 4) {
    const d4 dy = my - (double(y + j) + 0.5) - d4{0, 1, 2, 3};
    const d4 cdy2 = c * dy * dy, v = k * dy;
    l4 m{};
    for (int sg = sg0; sg <= sg1; ++sg) {
      // dx = mx − pixel centre over the segment's centres inside the box
      const int xa = std::max(sx0, x0 + sg * kLanes), xb = std::min(sx1, x0 + sg * kLanes + kLanes - 1);
      const double lo = mx - (double(xb) + 0.5), hi = mx - (double(xa) + 0.5);
      d4 dx = v < lo ? d4{} + lo : v;
      dx = dx > hi ? d4{} + hi : dx;
      const d4 q = a * dx * dx + (b2 * dx * dy + cdy2);
      m |= (q <= g.bound) & int64_t(uint32_t(1) << sg);
    }
    for (int l = 0; l < 4 && j + l < n; ++l) out[j + l] = uint32_t(m[l]), count[j + l] += m[l] != 0;
  }
}
// Tile-local copy of a kept Gaussian (TileRows::build): the row walks read the tile's Gaussians
// in order instead of gathering them from the frame's array at random.
template <typename T>
struct TileEntry {
  RowGaussian<T> g;
  int32_t i, id;  // its tile-list position and flat id
  T log_opacity;  // ln o, for RowAlpha

  // Its α along the pixel row whose centres are at y = py (the forward's and the backward's).
  RowAlpha<T> row_alpha(T py) const {
    return RowAlpha<T>(g.opacity, log_opacity, g.mx, g.my, g.a, g.b, g.c, py);
  }
};

// Every Gaussian's RowGaussian; float32 computes the supports 8 at a time (support_lanes, the
// same bits), each chunk's tail one by one.
// out: [C·N], e.g. a GaussianArray (gaussian_array.h).
template <typename T>
void prepare_gaussians(const RasterArgs<T>& a, RowGaussian<T>* const out) {
  cpu::parallel_for(0, a.C * a.N, 2048, [&](int64_t begin, int64_t end) {
    const auto finish = [&](int64_t id, double bound) {
      RowGaussian<T>& g = out[id];
      g.opacity = a.opacities[id];
      g.phi = !a.sorted ? depth_weight<T>(a.depths[id], a.sigma_w, a.beta) : T(1);
      g.bound = bound;
    };
    int64_t id = begin;
    if constexpr (std::is_same_v<T, float>)
      for (; id + kLanes <= end; id += kLanes) {
        const SupportLanes s =
            support_lanes(a.means2d + 2 * id, a.conics + 3 * id, a.opacities + id);
        for (int l = 0; l < kLanes; ++l)
          static_cast<Support<T>&>(out[id + l]) = s.support(l), finish(id + l, s.bound[l]);
      }
    for (; id < end; ++id) {
      Support<T>& s = out[id];
      s = make_support<T>(a.means2d[2 * id], a.means2d[2 * id + 1], a.conics[3 * id],
                          a.conics[3 * id + 1], a.conics[3 * id + 2], a.opacities[id]);
      double bound;
      finish(id, support_rect_bound<double>(s.a, s.b, s.c, s.level, &bound) ? bound : -INFINITY);
    }
  });
}

template <typename T>
struct TileRows;

// The 8-pixel segments of one tile row, pixels [x0, x1] of row y: each segment's pixel centres and
// the lanes inside the row. The forward and backward row scans share this set-up and bucket().
template <typename T>
struct RowSegments {
  using V = typename Lanes<T>::V;
  using M = typename Lanes<T>::M;
  int x0, x1, n;           // n segments, the last one partial when the row is not a multiple of 8
  T py;                    // the row's pixel-centre y
  V px[kMaxSegments];      // pixel-centre x per lane
  M inside[kMaxSegments];  // −1 on lanes inside [x0, x1]

  RowSegments(int x0_, int x1_, int y) : x0(x0_), x1(x1_), n((x1_ - x0_) / kLanes + 1) {
    V lane{};
    M lane_i{};
    for (int i = 0; i < kLanes; ++i) lane[i] = T(i), lane_i[i] = i;
    py = T(y) + T(0.5);
    for (int sg = 0; sg < n; ++sg) {
      const int sx = x0 + sg * kLanes;
      px[sg] = lane + (T(sx) + T(0.5));
      inside[sg] = (lane_i + sx) <= x1;
    }
  }
  int first_pixel(int sg) const { return x0 + sg * kLanes; }
  int width(int sg) const { return std::min(kLanes, x1 - first_pixel(sg) + 1); }

  // Row r's Gaussians of the tile (TileRows: the kept entries whose support crosses it, with the
  // segments row_masks found) bucketed by segment, each bucket front to back: list[sg·cap + q],
  // q < count[sg], the entries whose support ellipse crosses the row inside segment sg. A segment
  // a Gaussian misses has no lane with α ≥ 1/255 and is never evaluated. Segment by segment, a
  // scan keeps its transmittance in registers and stops on its own saturation.
  void bucket(const TileRows<T>& tr, int r, int32_t* list, size_t cap, int* count) const;
};

template <typename T>
struct TileRows {
  int x0, y0, x1, y1;                      // the tile's pixels inside the image (inclusive)
  std::vector<TileEntry<T>> kept;          // the Gaussians kept, in list (depth) order
  std::vector<int32_t> span;               // [kept, 2]: first and last row of each
  std::vector<uint32_t> cross;             // per kept entry, per row of its span: row_masks
  std::vector<int32_t> row_count;          // per row, how many kept entries cross it
  std::vector<int32_t> row_start, row_fill, items;  // per row, kept entries crossing it
  std::vector<uint32_t> masks;             // per items entry: the segments it crosses

  // The tile's whole list [start, end): begin, add every entry, index_rows.
  // prefetch_features: fetch every kept Gaussian's feature row here (the forward passes false:
  // it copies them, TileFeatures).
  void build(const RasterArgs<T>& a, const RowGaussian<T>* gs, int tx, int ty, int32_t start,
             int32_t end, bool prefetch_features = true) {
    begin(a, tx, ty);
    add(a, gs, start, 0, end - start, prefetch_features);
    index_rows();
  }

  // Tile (tx, ty), nothing kept yet.
  void begin(const RasterArgs<T>& a, int tx, int ty) {
    const PixelBox px = tile_pixels(tx, ty, a.tile_size, a.width, a.height);
    x0 = px.x0, y0 = px.y0, x1 = px.x1, y1 = px.y1;
    kept.clear(), span.clear(), cross.clear();
    row_count.assign(y1 - y0 + 1, 0);
  }

  // Appends the tile-list positions [from, to) (of the list starting at flatten_ids[start]) its
  // exact test keeps: a list is added in pieces front to back (the forward stops adding once its
  // pixels saturate), and the kept entries, their rows and masks are those of one whole build.
  void add(const RasterArgs<T>& a, const RowGaussian<T>* gs, int32_t start, int32_t from,
           int32_t to, bool prefetch_features) {
    const PixelBox px{x0, y0, x1, y1};
    const int32_t* ids = a.flatten_ids + start;
    for (int32_t i = from; i < to; ++i) {
      // The list is in depth order, so gs is read at random: fetch ahead of the test.
      constexpr int kAhead = 12;
      if (i + kAhead < to) prefetch_gaussian(gs + ids[i + kAhead]);
      const RowGaussian<T>& g = gs[ids[i]];
      // (exact binning listed only pairs the ellipse meets; the support box may still drop one)
      if (!support_meets_tile<T>(g, g.bound, px)) continue;
      const int r0 = std::max(g.box.y0, y0) - y0, r1 = std::min(g.box.y1, y1) - y0;
      // ln o from the support's ln(255·o) (o > 1/255 here), in double as it
      kept.push_back({g, i, ids[i], T(g.level - std::log(kAlphaMinInv))});
      span.insert(span.end(), {r0, r1});
      const size_t at = cross.size();
      cross.resize(at + (r1 - r0 + 1));
      row_masks(g, x0, x1, y0 + r0, r1 - r0 + 1, cross.data() + at, row_count.data() + r0);
      // its feature row, read by the accumulation after the rows' scans
      if (prefetch_features) prefetch_feature_row(a, ids[i]);
    }
  }

  // The row lists (row_start, items, masks) of every entry kept so far.
  void index_rows() {
    const int n_rows = y1 - y0 + 1;
    row_start.resize(n_rows + 1);
    row_start[0] = 0;
    for (int r = 0; r < n_rows; ++r) row_start[r + 1] = row_start[r] + row_count[r];
    // Branch-free fill: a row the Gaussian misses writes to a spare slot past the end.
    const int32_t spare = row_start[n_rows];
    items.resize(spare + 1), masks.resize(spare + 1);
    row_fill.assign(row_start.begin(), row_start.end() - 1);
    const uint32_t* m = cross.data();
    for (size_t k = 0; k < kept.size(); ++k)
      for (int r = span[2 * k]; r <= span[2 * k + 1]; ++r, ++m) {
        const int32_t at = *m ? row_fill[r] : spare;
        items[at] = int32_t(k), masks[at] = *m;
        row_fill[r] += *m != 0;
      }
  }

  // The cache lines of one Gaussian of the frame's array (one at float: GaussianArray aligns it).
  static void prefetch_gaussian(const RowGaussian<T>* g) {
    const char* p = reinterpret_cast<const char*>(g);
    __builtin_prefetch(p);
    if constexpr (sizeof(RowGaussian<T>) > 64) __builtin_prefetch(p + sizeof(RowGaussian<T>) - 1);
  }

  static void prefetch_feature_row(const RasterArgs<T>& a, int32_t id) {
    const uintptr_t f = reinterpret_cast<uintptr_t>(a.colors + int64_t(id) * a.CH);
    const uintptr_t last = f + uintptr_t(a.CH) * sizeof(T) - 1;
    for (uintptr_t line = f & ~uintptr_t(63); line <= last; line += 64)
      __builtin_prefetch(reinterpret_cast<const void*>(line));
  }
};

// bucket() for tiles of N ≤ 4 segments (up to 32 px; the default 16: 2): every entry written to
// every segment's next slot, the count advanced where its mask bit is set (no branch). N a
// constant, so the counts live in registers: as a runtime-length array they went through memory,
// each entry's slot address waiting on the last entry's stored count (the benchmark scene, the
// forward's raster op alone at 2 threads: 42.3-43.2 -> 39.6-39.8 ms).
template <int N>
void bucket_dense(const int32_t* items, const uint32_t* masks, int n_items, int32_t* list,
                  size_t cap, int* count) {
  int c[N] = {};
  for (int j = 0; j < n_items; ++j) {
    const int32_t k = items[j];
    const uint32_t m = masks[j];
    for (int sg = 0; sg < N; ++sg) {
      list[sg * cap + c[sg]] = k;
      c[sg] += (m >> sg) & 1;
    }
  }
  for (int sg = 0; sg < N; ++sg) count[sg] = c[sg];
}

template <typename T>
void RowSegments<T>::bucket(const TileRows<T>& tr, int r, int32_t* list, size_t cap,
                            int* count) const {
  const int32_t* items = tr.items.data() + tr.row_start[r];
  const uint32_t* masks = tr.masks.data() + tr.row_start[r];
  const int n_items = tr.row_start[r + 1] - tr.row_start[r];
  switch (n) {
    case 1: return bucket_dense<1>(items, masks, n_items, list, cap, count);
    case 2: return bucket_dense<2>(items, masks, n_items, list, cap, count);
    case 3: return bucket_dense<3>(items, masks, n_items, list, cap, count);
    case 4: return bucket_dense<4>(items, masks, n_items, list, cap, count);
  }
  for (int sg = 0; sg < n; ++sg) count[sg] = 0;
  for (int j = 0; j < n_items; ++j)  // wider tiles: the segments each entry crosses
    for (uint32_t m = masks[j]; m; m &= m - 1) {
      const int sg = __builtin_ctz(m);
      list[sg * cap + count[sg]++] = items[j];
    }
}

// The tile's kept Gaussians' feature rows as the segments' accumulations read them (row k:
// kept entry k). Wide rows are copied into one contiguous block, in list order: the
// accumulations then read a kept × CH block that stays in L2 and is walked in increasing address
// order, which the hardware prefetcher follows, instead of rows scattered over the frame's
// [N, CH] features (random lines, and a TLB miss each on wide rows). The copy's loads are
// independent of each other, so many are in flight at once. Rows of one to five cache lines
// (features of D = 12 to 76 floats, RGB + depth included) are instead read where the frame keeps
// them, each prefetched by the tile's set-up as it keeps the Gaussian (TileRows::add), the α
// tests' time hiding the fetch: no copy to write (the benchmark scene at D = 64: raster 1.04–1.06×;
// at D = 128 and 256 the early prefetch of 9–17 lines a row was as slow or slower than the copy,
// and RGB's one-line rows gained nothing; docs/cpu.md, "Feature GEMM").
template <typename T>
struct TileFeatures {
  std::vector<T> rows;
  const T* frame = nullptr;               // in place: the frame's [N, CH] rows
  const TileRows<T>* tile = nullptr;      // in place: the kept entries' ids

  // Whether rows of CH channels are read in place (with the set-up's prefetch) rather than copied.
  static bool in_place(int64_t CH) {
    const int64_t bytes = CH * int64_t(sizeof(T));
    return bytes >= 64 && bytes <= 5 * 64;
  }

  // The rows of kept entries [from, kept): those before are copied already (TileRows::add's
  // pieces). place (in_place(CH), the set-up having prefetched them): read where they are.
  void gather(const RasterArgs<T>& a, const TileRows<T>& tr, bool place, size_t from = 0) {
    frame = place ? a.colors : nullptr, tile = &tr;
    if (place) return;
    using V = typename Lanes<T>::V;
    const size_t n = tr.kept.size(), CH = size_t(a.CH), n_vec = CH / kLanes;
    if (rows.size() < n * CH) rows.resize(n * CH);
    // about 16 lines in flight (narrow rows, RGB: one line each, 16 rows ahead)
    const size_t lines = (CH * sizeof(T) + 63) / 64, kAhead = std::max<size_t>(4, 16 / lines);
    for (size_t k = from; k < n; ++k) {
      if (k + kAhead < n) TileRows<T>::prefetch_feature_row(a, tr.kept[k + kAhead].id);
      const T* src = a.colors + int64_t(tr.kept[k].id) * a.CH;
      T* dst = rows.data() + k * CH;
      // whole vectors, then the tail (a runtime-length memcpy would be a library call per row)
      for (size_t v = 0; v < n_vec; ++v) {
        V x;
        std::memcpy(&x, src + v * kLanes, sizeof(V));
        std::memcpy(dst + v * kLanes, &x, sizeof(V));
      }
      for (size_t c = n_vec * kLanes; c < CH; ++c) dst[c] = src[c];
    }
  }
  // Row k's address, for a loop over entries: a value copy of what it needs, taken before the
  // loop (the loop's own stores could alias these members, which it would then reload per entry).
  struct Rows {
    const T* base;
    const TileEntry<T>* kept;  // in place: row k is entry k's id's; else row k is k
    int64_t CH;
    const T* operator()(int32_t k) const { return base + (kept ? kept[k].id : k) * CH; }
  };
  Rows rows_of(int64_t CH) const {
    return frame ? Rows{frame, tile->kept.data(), CH} : Rows{rows.data(), nullptr, CH};
  }
};

}  // namespace cpu
}  // namespace gsrender
