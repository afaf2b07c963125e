// Tile binning on the GPU, with the CPU's result exactly (csrc/ops/cpu/binning.cpp): the same
// per-Gaussian pixel box (gsrender::pixel_box) and, with conics, the same exact ellipse–tile
// test (gsrender::for_each_bin_tile), then every (tile, Gaussian) pair is emitted in
// Gaussian order and radix-sorted by a 64-bit key, camera·tile index in the high 32 bits and the
// depth as an order-preserving uint32 in the low 32 bits. cub's radix sort is stable, so equal
// depths keep Gaussian order, as the CPU's stable_sort over ids in index order does.
#include <cub/cub.cuh>
#include <type_traits>

#include "gsrender/launch/binning.h"
#include "gsrender/raster_plan.h"
#include "gsrender/support_ellipse.h"
#include "gsrender/tiles.h"

namespace gsrender {
namespace gpu {
namespace {

constexpr int kThreads = 256;

unsigned num_blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// Tile rectangle [tx0, tx1] × [ty0, ty1] of Gaussian i, the CPU's rule; false when culled or
// off-image.
template <typename T>
__device__ __forceinline__ bool tile_rect(const T* m2d, const int32_t* rad, int64_t i, int width,
                                          int height, int tile_size, int* r) {
  const int rx = rad[2 * i], ry = rad[2 * i + 1];
  if (rx <= 0 && ry <= 0) return false;
  const PixelBox b = pixel_box<T>(m2d[2 * i], m2d[2 * i + 1], rx, ry, width, height);
  if (b.empty()) return false;
  r[0] = b.x0 / tile_size, r[1] = b.y0 / tile_size;
  r[2] = b.x1 / tile_size, r[3] = b.y1 / tile_size;
  return true;
}

// conics, opac: nullptr (box binning) or the exact test's inputs (for_each_bin_tile, the CPU's).
template <typename T>
__global__ void count_tiles_kernel(int64_t CN, const T* __restrict__ m2d,
                                   const int32_t* __restrict__ rad, const T* __restrict__ conics,
                                   const T* __restrict__ opac, int width, int height,
                                   int tile_size, int64_t* __restrict__ counts) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= CN) return;
  int r[4];
  counts[i] = tile_rect(m2d, rad, i, width, height, tile_size, r)
                  ? for_each_bin_tile<T>(r, m2d, conics, opac, i, tile_size, width, height,
                                         [](int, int) {})
                  : 0;
}

// Order-preserving maps of depths to unsigned integers (negative floats reversed, sign bit
// flipped for the rest); -0 is folded into +0 so that they tie, as the CPU's `<` has them.
__device__ __forceinline__ uint32_t float_order_key(float d) {
  if (d == 0.0f) d = 0.0f;
  const uint32_t u = __float_as_uint(d);
  return u ^ ((u >> 31) ? 0xffffffffu : 0x80000000u);
}
__device__ __forceinline__ unsigned long long double_order_key(double d) {
  if (d == 0.0) d = 0.0;
  const unsigned long long u = static_cast<unsigned long long>(__double_as_longlong(d));
  return u ^ ((u >> 63) ? 0xffffffffffffffffull : 0x8000000000000000ull);
}

// Writes Gaussian i's pairs at [ends[i − 1], ends[i]), so pairs sit in Gaussian order.
// low_depth: put the float depth key in the low 32 bits (float32 sorted mode); 0 otherwise.
template <typename T>
__global__ void emit_pairs_kernel(int64_t CN, int64_t N, const T* __restrict__ m2d,
                                  const int32_t* __restrict__ rad, const T* __restrict__ depths,
                                  const T* __restrict__ conics, const T* __restrict__ opac,
                                  int width, int height, int tile_size, int TW, int TH,
                                  const int64_t* __restrict__ ends, bool low_depth,
                                  unsigned long long* __restrict__ keys,
                                  int32_t* __restrict__ vals) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= CN) return;
  int r[4];
  if (!tile_rect(m2d, rad, i, width, height, tile_size, r)) return;
  int64_t pos = i > 0 ? ends[i - 1] : 0;
  const unsigned long long base = static_cast<unsigned long long>(i / N) * TH * TW;
  const unsigned long long low = low_depth ? float_order_key(static_cast<float>(depths[i])) : 0;
  for_each_bin_tile<T>(r, m2d, conics, opac, i, tile_size, width, height, [&](int tx, int ty) {
    keys[pos] = ((base + static_cast<unsigned long long>(ty) * TW + tx) << 32) | low;
    vals[pos++] = static_cast<int32_t>(i);
  });
}

__global__ void depth_key64_kernel(int64_t M, const double* __restrict__ depths,
                                   const int32_t* __restrict__ vals,
                                   unsigned long long* __restrict__ dkeys) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < M) dkeys[i] = double_order_key(depths[vals[i]]);
}

// tile_offsets[t] = first sorted position whose tile is >= t (empty tiles get the next start, M
// at the end), as the CPU's prefix sums. Thread i ∈ [0, M] fills the tiles between pair i−1's
// tile and pair i's.
__global__ void tile_offsets_kernel(int64_t M, int64_t n_tiles,
                                    const unsigned long long* __restrict__ keys,
                                    int32_t* __restrict__ offsets) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i > M) return;
  const int64_t cur = i < M ? static_cast<int64_t>(keys[i] >> 32) : n_tiles;
  const int64_t prev = i > 0 ? static_cast<int64_t>(keys[i - 1] >> 32) : -1;
  for (int64_t t = prev + 1; t <= cur && t < n_tiles; ++t) offsets[t] = static_cast<int32_t>(i);
}

// ids_out[i] = ids[perm[i]], keys_out[i] = keys[perm[i]] (the float64 path's reorder).
__global__ void gather_pairs_kernel(int64_t M, const int32_t* __restrict__ perm,
                                    const unsigned long long* __restrict__ keys,
                                    const int32_t* __restrict__ vals,
                                    unsigned long long* __restrict__ keys_out,
                                    int32_t* __restrict__ vals_out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < M) keys_out[i] = keys[perm[i]], vals_out[i] = vals[perm[i]];
}

__global__ void iota_kernel(int64_t M, int32_t* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < M) out[i] = static_cast<int32_t>(i);
}

// The tile grid of a binning call.
struct Grid {
  int TW, TH;
  int64_t n_tiles;
  int tile_bits;  // bits of the tile index in the sort key (at least one: cub needs begin < end)
};
template <typename T>
Grid grid_of(const launch::BinArgs<T>& a) {
  Grid g;
  const TileGrid tg = make_tile_grid(a.C, a.width, a.height, a.tile_size);
  g.TW = tg.tiles_x, g.TH = tg.tiles_y, g.n_tiles = tg.count;
  g.tile_bits = 1;
  while ((int64_t(1) << g.tile_bits) < g.n_tiles) ++g.tile_bits;
  return g;
}

// bin_count's scratch: the per-Gaussian counts and cub's scan storage.
template <typename T>
struct CountLayout {
  int64_t* counts;
  void* cub_tmp;
  size_t cub_bytes = 0;
  size_t total;
  CountLayout(const launch::BinArgs<T>& a, void* base) {
    const int64_t CN = a.C * a.N;
    cub::DeviceScan::InclusiveSum(nullptr, cub_bytes, static_cast<int64_t*>(nullptr),
                                  static_cast<int64_t*>(nullptr), CN);
    launch::Carver c(base);
    counts = c.take<int64_t>(CN);
    cub_tmp = c.take<char>(static_cast<int64_t>(cub_bytes));
    total = c.used();
  }
};

// bin_sort's scratch: the keys (and the float64 path's depth keys and permutation), the sorted
// keys tile_offsets reads, the unsorted ids, and cub's sort storage (the larger of its sorts).
template <typename T>
struct SortLayout {
  unsigned long long *keys, *keys_out, *dkeys = nullptr, *dkeys_out = nullptr, *keys2 = nullptr;
  int32_t *vals, *perm = nullptr, *perm_out = nullptr, *vals2 = nullptr;
  void* cub_tmp;
  size_t cub_bytes = 0;
  size_t total;
  SortLayout(const launch::BinArgs<T>& a, int64_t M, bool is_double, void* base) {
    const Grid g = grid_of(a);
    const int begin_bit = a.sort && !is_double ? 0 : 32;
    cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, static_cast<unsigned long long*>(nullptr),
                                    static_cast<unsigned long long*>(nullptr),
                                    static_cast<int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                    M, begin_bit, 32 + g.tile_bits);
    if (a.sort && is_double) {
      size_t bytes = 0;
      cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<unsigned long long*>(nullptr),
                                      static_cast<unsigned long long*>(nullptr),
                                      static_cast<int32_t*>(nullptr),
                                      static_cast<int32_t*>(nullptr), M, 0, 64);
      cub_bytes = bytes > cub_bytes ? bytes : cub_bytes;
    }
    launch::Carver c(base);
    keys = c.take<unsigned long long>(M);
    keys_out = c.take<unsigned long long>(M);
    vals = c.take<int32_t>(M);
    if (a.sort && is_double) {
      dkeys = c.take<unsigned long long>(M), dkeys_out = c.take<unsigned long long>(M);
      keys2 = c.take<unsigned long long>(M);
      perm = c.take<int32_t>(M), perm_out = c.take<int32_t>(M), vals2 = c.take<int32_t>(M);
    }
    cub_tmp = c.take<char>(static_cast<int64_t>(cub_bytes));
    total = c.used();
  }
};

// ---- validation of untrusted binning arrays (launch_validate_binning) ----------------------

using launch::kBadIds;
using launch::kBadLastIds;
using launch::kBadOffsets;


__global__ void check_offsets_kernel(int64_t T, int64_t M, const int32_t* __restrict__ off,
                                     int* __restrict__ flags) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T) return;
  const int64_t end = t + 1 < T ? off[t + 1] : M;
  if (!(off[t] >= 0 && off[t] <= end && end <= M)) atomicOr(flags, kBadOffsets);
}

// Entry i's tile is the last t with off[t] <= i (a binary search); entries before off[0] belong
// to no tile and are not read by any kernel. With non-monotonic offsets the search lands on some
// tile (still in bounds) and check_offsets_kernel has flagged the error anyway.
__global__ void check_ids_kernel(int64_t T, int64_t M, int64_t N, int64_t tiles_per_cam,
                                 const int32_t* __restrict__ off, const int32_t* __restrict__ ids,
                                 int* __restrict__ flags) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= M || T == 0 || i < off[0]) return;
  int64_t lo = 0, hi = T - 1;  // invariant: off[lo] <= i
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (off[mid] <= i) lo = mid; else hi = mid - 1;
  }
  const int64_t cam = lo / tiles_per_cam;
  if (!(ids[i] >= cam * N && ids[i] < (cam + 1) * N)) atomicOr(flags, kBadIds);
}

__global__ void check_last_ids_kernel(int64_t C, int width, int height, int tile_size, int TW,
                                      int TH, int64_t M, const int32_t* __restrict__ off,
                                      const int32_t* __restrict__ last, int* __restrict__ flags) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= C * height * width) return;
  const int64_t c = p / (int64_t(height) * width);
  const int y = static_cast<int>((p / width) % height), x = static_cast<int>(p % width);
  const int64_t t = (c * TH + y / tile_size) * TW + x / tile_size;
  const int64_t start = off[t], end = t + 1 < C * TH * TW ? off[t + 1] : M;
  if (!(last[p] >= start && last[p] <= end)) atomicOr(flags, kBadLastIds);
}

}  // namespace
}  // namespace gpu

namespace launch {

using gpu::kThreads;
using gpu::num_blocks;

template <typename T>
size_t bin_count_workspace_bytes(const BinArgs<T>& a) {
  return gpu::CountLayout<T>(a, nullptr).total;
}

template <typename T>
cudaError_t launch_bin_count(const BinArgs<T>& a, int64_t* ends, Workspace ws,
                             cudaStream_t stream) {
  const int64_t CN = a.C * a.N;
  if (CN == 0) return cudaSuccess;
  const gpu::CountLayout<T> l(a, ws.ptr);
  if (ws.bytes < l.total) return cudaErrorInvalidValue;
  GSR_LAUNCH(num_blocks(CN), kThreads, 0, stream, gpu::count_tiles_kernel<T>)(
      CN, a.means2d, a.radii, a.conics, a.opacities, a.width, a.height, a.tile_size, l.counts);
  GSR_CUDA_TRY(cudaGetLastError());
  size_t bytes = l.cub_bytes;
  return cub::DeviceScan::InclusiveSum(l.cub_tmp, bytes, l.counts, ends, CN, stream);
}

template <typename T>
size_t bin_sort_workspace_bytes(const BinArgs<T>& a, int64_t M) {
  return gpu::SortLayout<T>(a, M, std::is_same_v<T, double>, nullptr).total;
}

template <typename T>
cudaError_t launch_bin_sort(const BinArgs<T>& a, const int64_t* ends, int64_t M,
                            int32_t* tile_offsets, int32_t* flatten_ids, Workspace ws,
                            cudaStream_t stream) {
  constexpr bool is_double = std::is_same_v<T, double>;
  const gpu::Grid g = gpu::grid_of(a);
  const gpu::SortLayout<T> l(a, M, is_double, ws.ptr);
  if (ws.bytes < l.total) return cudaErrorInvalidValue;
  const int64_t CN = a.C * a.N;
  unsigned long long* keys = l.keys;
  int32_t* vals = l.vals;
  if (M > 0) {
    GSR_LAUNCH(num_blocks(CN), kThreads, 0, stream, gpu::emit_pairs_kernel<T>)(
        CN, a.N, a.means2d, a.radii, a.depths, a.conics, a.opacities, a.width, a.height,
        a.tile_size, g.TW, g.TH, ends,
        a.sort && !is_double, keys, vals);
    GSR_CUDA_TRY(cudaGetLastError());
    size_t bytes = l.cub_bytes;
    if (a.sort && is_double) {
      // float64 depths do not fit the low 32 bits exactly: sort by the full 64-bit depth key
      // first (stable, Gaussian order on ties), then stably by tile below.
      GSR_LAUNCH(num_blocks(M), kThreads, 0, stream, gpu::depth_key64_kernel)(
          M, reinterpret_cast<const double*>(a.depths), vals, l.dkeys);
      GSR_CUDA_TRY(cudaGetLastError());
      GSR_LAUNCH(num_blocks(M), kThreads, 0, stream, gpu::iota_kernel)(M, l.perm);
      GSR_CUDA_TRY(cudaGetLastError());
      GSR_CUDA_TRY(cub::DeviceRadixSort::SortPairs(l.cub_tmp, bytes, l.dkeys, l.dkeys_out,
                                                   l.perm, l.perm_out, M, 0, 64, stream));
      GSR_LAUNCH(num_blocks(M), kThreads, 0, stream, gpu::gather_pairs_kernel)(M, l.perm_out, keys, vals,
                                                                        l.keys2, l.vals2);
      GSR_CUDA_TRY(cudaGetLastError());
      keys = l.keys2, vals = l.vals2;
    }
    // Only the bits that vary: the tile index (and the float depth key when it is there). With
    // sort=False (or depth already ordered) the stable sort by tile alone keeps the incoming
    // order, Gaussian order as the CPU's counting sort.
    const int begin_bit = a.sort && !is_double ? 0 : 32;
    bytes = l.cub_bytes;
    GSR_CUDA_TRY(cub::DeviceRadixSort::SortPairs(l.cub_tmp, bytes, keys, l.keys_out, vals,
                                                 flatten_ids, M, begin_bit, 32 + g.tile_bits,
                                                 stream));
  }
  GSR_LAUNCH(num_blocks(M + 1), kThreads, 0, stream, gpu::tile_offsets_kernel)(M, g.n_tiles, l.keys_out,
                                                                       tile_offsets);
  return cudaGetLastError();
}

cudaError_t launch_validate_binning(const ValidateBinningArgs& a, int* flags,
                                    cudaStream_t stream) {
  const int64_t T = a.C * a.TH * a.TW;
  GSR_CUDA_TRY(cudaMemsetAsync(flags, 0, sizeof(int), stream));
  if (T == 0) return cudaSuccess;
  GSR_LAUNCH(num_blocks(T), kThreads, 0, stream, gpu::check_offsets_kernel)(T, a.M, a.tile_offsets,
                                                                     flags);
  GSR_CUDA_TRY(cudaGetLastError());
  if (a.M > 0) {
    GSR_LAUNCH(num_blocks(a.M), kThreads, 0, stream, gpu::check_ids_kernel)(
        T, a.M, a.N, T / a.C, a.tile_offsets, a.flatten_ids, flags);
    GSR_CUDA_TRY(cudaGetLastError());
  }
  if (a.last_ids != nullptr) {
    const int64_t P = a.C * a.height * a.width;
    GSR_LAUNCH(num_blocks(P), kThreads, 0, stream, gpu::check_last_ids_kernel)(
        a.C, a.width, a.height, a.tile_size, a.TW, a.TH, a.M, a.tile_offsets, a.last_ids, flags);
    GSR_CUDA_TRY(cudaGetLastError());
  }
  return cudaSuccess;
}

#define GSR_INSTANTIATE(T)                                                                    \
  template size_t bin_count_workspace_bytes<T>(const BinArgs<T>&);                            \
  template cudaError_t launch_bin_count<T>(const BinArgs<T>&, int64_t*, Workspace, cudaStream_t); \
  template size_t bin_sort_workspace_bytes<T>(const BinArgs<T>&, int64_t);                    \
  template cudaError_t launch_bin_sort<T>(const BinArgs<T>&, const int64_t*, int64_t, int32_t*, \
                                          int32_t*, Workspace, cudaStream_t);
GSR_INSTANTIATE(float)
GSR_INSTANTIATE(double)
#undef GSR_INSTANTIATE

}  // namespace launch
}  // namespace gsrender
