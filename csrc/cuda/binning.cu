// Tile binning on the GPU, with the CPU's result exactly (csrc/cpu/binning.cpp): the same
// per-Gaussian pixel box (gsrender::pixel_box), then every (tile, Gaussian) pair is emitted in
// Gaussian order and radix-sorted by a 64-bit key, camera·tile index in the high 32 bits and the
// depth as an order-preserving uint32 in the low 32 bits. cub's radix sort is stable, so equal
// depths keep Gaussian order, as the CPU's stable_sort over ids in index order does.
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cub/cub.cuh>
#include <tuple>

#include "raster_common.cuh"

namespace gsrender {
namespace gpu {
namespace {

using at::Tensor;

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

template <typename T>
__global__ void count_tiles_kernel(int64_t CN, const T* __restrict__ m2d,
                                   const int32_t* __restrict__ rad, int width, int height,
                                   int tile_size, int64_t* __restrict__ counts) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= CN) return;
  int r[4];
  counts[i] = tile_rect(m2d, rad, i, width, height, tile_size, r)
                  ? int64_t(r[2] - r[0] + 1) * (r[3] - r[1] + 1)
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

// Writes Gaussian i's pairs at [ends[i] − count, ends[i]), so pairs sit in Gaussian order.
// low_depth: put the float depth key in the low 32 bits (float32 sorted mode); 0 otherwise.
template <typename T>
__global__ void emit_pairs_kernel(int64_t CN, int64_t N, const T* __restrict__ m2d,
                                  const int32_t* __restrict__ rad, const T* __restrict__ depths,
                                  int width, int height, int tile_size, int TW, int TH,
                                  const int64_t* __restrict__ ends, bool low_depth,
                                  unsigned long long* __restrict__ keys,
                                  int32_t* __restrict__ vals) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= CN) return;
  int r[4];
  if (!tile_rect(m2d, rad, i, width, height, tile_size, r)) return;
  int64_t pos = ends[i] - int64_t(r[2] - r[0] + 1) * (r[3] - r[1] + 1);
  const unsigned long long base = static_cast<unsigned long long>(i / N) * TH * TW;
  const unsigned long long low = low_depth ? float_order_key(static_cast<float>(depths[i])) : 0;
  for (int ty = r[1]; ty <= r[3]; ++ty)
    for (int tx = r[0]; tx <= r[2]; ++tx, ++pos) {
      keys[pos] = ((base + static_cast<unsigned long long>(ty) * TW + tx) << 32) | low;
      vals[pos] = static_cast<int32_t>(i);
    }
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

// Runs a cub device algorithm twice (size query, then work) with its temporary storage in a byte
// tensor from torch's caching allocator.
template <typename Fn>
void run_cub(const at::TensorOptions& opts, Fn&& fn) {
  size_t bytes = 0;
  C10_CUDA_CHECK(fn(nullptr, bytes));
  Tensor tmp = at::empty({static_cast<int64_t>(bytes)}, opts.dtype(at::kByte));
  C10_CUDA_CHECK(fn(tmp.data_ptr(), bytes));
}

unsigned long long* u64(const Tensor& t) {
  return reinterpret_cast<unsigned long long*>(t.data_ptr<int64_t>());
}

std::tuple<Tensor, Tensor> bin_tiles_cuda(const Tensor& means2d, const Tensor& radii,
                                          const Tensor& depths, int64_t width, int64_t height,
                                          int64_t tile_size, bool sort) {
  check_bin_tiles_inputs(means2d, radii, depths, width, height, tile_size);
  const c10::cuda::CUDAGuard guard(means2d.device());
  const int64_t C = means2d.size(0), N = means2d.size(1), CN = C * N;
  const int ts = static_cast<int>(tile_size);
  const int TW = ceil_div(static_cast<int>(width), ts), TH = ceil_div(static_cast<int>(height), ts);
  const int64_t n_tiles = C * TH * TW;
  TORCH_CHECK_VALUE(n_tiles < INT32_MAX, "bin_tiles: ", n_tiles, " tiles exceed int32 range");
  const auto iopts = radii.options();
  const auto lopts = radii.options().dtype(at::kLong);
  Tensor tile_offsets = at::empty({C, TH, TW}, iopts);  // [C, TH, TW]
  if (CN == 0) return {tile_offsets.zero_(), at::empty({0}, iopts)};
  const Tensor m2d = means2d.contiguous(), rad = radii.contiguous(), dep = depths.contiguous();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();

  Tensor counts = at::empty({CN}, lopts), ends = at::empty({CN}, lopts);  // [C*N]
  AT_DISPATCH_FLOATING_TYPES(m2d.scalar_type(), "bin_tiles_count", [&] {
    count_tiles_kernel<scalar_t><<<num_blocks(CN), kThreads, 0, stream>>>(
        CN, m2d.data_ptr<scalar_t>(), rad.data_ptr<int32_t>(), static_cast<int>(width),
        static_cast<int>(height), ts, counts.data_ptr<int64_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  run_cub(lopts, [&](void* tmp, size_t& bytes) {
    return cub::DeviceScan::InclusiveSum(tmp, bytes, counts.data_ptr<int64_t>(),
                                         ends.data_ptr<int64_t>(), CN, stream);
  });
  // The one host sync of binning: the number of intersections M sizes every later buffer.
  const int64_t M = ends[CN - 1].item<int64_t>();
  TORCH_CHECK_VALUE(M < INT32_MAX, "bin_tiles: ", M, " tile intersections exceed int32 range");

  Tensor keys = at::empty({M}, lopts);  // [M] (tile << 32) | depth key
  Tensor vals = at::empty({M}, iopts);  // [M] flat ids c*N + n
  const bool is_double = m2d.scalar_type() == at::kDouble;
  if (M > 0) {
    AT_DISPATCH_FLOATING_TYPES(m2d.scalar_type(), "bin_tiles_emit", [&] {
      emit_pairs_kernel<scalar_t><<<num_blocks(CN), kThreads, 0, stream>>>(
          CN, N, m2d.data_ptr<scalar_t>(), rad.data_ptr<int32_t>(), dep.data_ptr<scalar_t>(),
          static_cast<int>(width), static_cast<int>(height), ts, TW, TH,
          ends.data_ptr<int64_t>(), sort && !is_double, u64(keys), vals.data_ptr<int32_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    if (sort && is_double) {
      // float64 depths do not fit the low 32 bits exactly: sort by the full 64-bit depth key
      // first (stable, Gaussian order on ties), then stably by tile below.
      Tensor dkeys = at::empty({M}, lopts), dkeys_out = at::empty({M}, lopts);
      Tensor perm = at::arange(M, iopts), perm_out = at::empty({M}, iopts);
      depth_key64_kernel<<<num_blocks(M), kThreads, 0, stream>>>(
          M, dep.data_ptr<double>(), vals.data_ptr<int32_t>(), u64(dkeys));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      run_cub(lopts, [&](void* tmp, size_t& bytes) {
        return cub::DeviceRadixSort::SortPairs(tmp, bytes, u64(dkeys), u64(dkeys_out),
                                               perm.data_ptr<int32_t>(),
                                               perm_out.data_ptr<int32_t>(), M, 0, 64, stream);
      });
      keys = keys.index_select(0, perm_out);
      vals = vals.index_select(0, perm_out);
    }
    // Only the bits that vary: the tile index (and the float depth key when it is there). With
    // sort=False (or depth already ordered) the stable sort by tile alone keeps the incoming
    // order, Gaussian order as the CPU's counting sort.
    int tile_bits = 1;  // at least one bit: cub needs begin_bit < end_bit
    while ((int64_t(1) << tile_bits) < n_tiles) ++tile_bits;
    const int begin_bit = sort && !is_double ? 0 : 32;
    Tensor keys_out = at::empty({M}, lopts), vals_out = at::empty({M}, iopts);
    run_cub(lopts, [&](void* tmp, size_t& bytes) {
      return cub::DeviceRadixSort::SortPairs(tmp, bytes, u64(keys), u64(keys_out),
                                             vals.data_ptr<int32_t>(),
                                             vals_out.data_ptr<int32_t>(), M, begin_bit,
                                             32 + tile_bits, stream);
    });
    keys = keys_out;
    vals = vals_out;
  }
  tile_offsets_kernel<<<num_blocks(M + 1), kThreads, 0, stream>>>(
      M, n_tiles, u64(keys), tile_offsets.data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {tile_offsets, vals};
}

// ---- validation of untrusted binning arrays (declared in raster_common.cuh) ----------------

constexpr int kBadOffsets = 1, kBadIds = 2, kBadLastIds = 4;

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

void validate_binning_cuda(const RasterInputs& in, const Tensor* last_ids, int64_t width,
                           int64_t height, int64_t tile_size) {
  const int64_t M = in.flatten_ids.numel(), C = in.means2d.size(0), N = in.means2d.size(1);
  const int64_t T = in.tile_offsets.numel();
  if (T == 0) return;
  const int TW = static_cast<int>(in.tile_offsets.size(2));
  const int TH = static_cast<int>(in.tile_offsets.size(1));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  Tensor flags = at::zeros({1}, in.tile_offsets.options());
  const int32_t* off = in.tile_offsets.data_ptr<int32_t>();
  check_offsets_kernel<<<num_blocks(T), kThreads, 0, stream>>>(T, M, off,
                                                               flags.data_ptr<int32_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (M > 0) {
    check_ids_kernel<<<num_blocks(M), kThreads, 0, stream>>>(
        T, M, N, T / C, off, in.flatten_ids.data_ptr<int32_t>(), flags.data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  Tensor last_c;
  if (last_ids != nullptr) {
    last_c = last_ids->contiguous();
    const int64_t P = C * height * width;
    check_last_ids_kernel<<<num_blocks(P), kThreads, 0, stream>>>(
        C, static_cast<int>(width), static_cast<int>(height), static_cast<int>(tile_size), TW,
        TH, M, off, last_c.data_ptr<int32_t>(), flags.data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  const int bad = flags.item<int32_t>();  // the documented host sync of the raster ops
  TORCH_CHECK_VALUE(!(bad & kBadOffsets),
                    "tile_offsets must be non-decreasing within [0, len(flatten_ids)]");
  TORCH_CHECK_VALUE(!(bad & kBadIds), "flatten_ids holds an id outside its camera's Gaussians");
  TORCH_CHECK_VALUE(!(bad & kBadLastIds),
                    "last_ids must lie inside each pixel's tile run (as rasterize_fwd returns it)");
}

}  // namespace gpu
}  // namespace gsrender

TORCH_LIBRARY_IMPL(gsrender, CUDA, m) { m.impl("bin_tiles", &gsrender::gpu::bin_tiles_cuda); }
