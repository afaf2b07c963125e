// The launch plan of one rasterize call (docs/design.md §5.6): the user's precision and the
// target (backend, dtype, tile size, compute capability) choose the forward kernel and the
// backward kernel once, in rasterize_fwd, which returns the plan; rasterize_bwd runs the
// backward kernel the plan names and never re-decides. Torch-free (the launchers and
// tools/kernel_driver use it); Python reads the names below through _C.raster_kernels() and
// _C.raster_precisions() (and the modes through _C.raster_modes()), so Python and C++ share one
// enum.
#pragma once
#include <cstdint>
#include <cstring>

namespace gsrender {

// Every rasterize kernel of both backends. Values are stored in the plan tensor; names are
// what Python reports (gsrender.raster_plan).
enum class RasterKernel : int64_t {
  kScalar = 0,     // the per-pixel 3DGS loop (CPU forward: sorted mode); CUDA: float atomics
  kMatrix = 1,     // CPU: α scan on 8-pixel row segments + fp32/fp64 GEMM, and its backward
  kMmaF16 = 2,     // CUDA Tensor Cores, fp16 operands (forward and backward)
  kMmaBF16 = 3,    // CUDA Tensor Cores, bf16 operands (forward and backward)
  kMmaTF32 = 4,    // CUDA Tensor Cores, tf32 operands (forward only)
  kScalarDet = 5,  // CUDA backward of kScalar in a fixed reduction order (det_reduce.h)
  kMatrixDet = 6,  // CPU backward of kMatrix in a fixed reduction order (det_reduce.h)
};
constexpr int kNumRasterKernels = 7;
inline constexpr const char* kRasterKernelNames[kNumRasterKernels] = {
    "scalar", "matrix", "mma_f16", "mma_bf16", "mma_tf32", "scalar_det", "matrix_det"};

constexpr bool is_mma(RasterKernel k) {
  return k == RasterKernel::kMmaF16 || k == RasterKernel::kMmaBF16 || k == RasterKernel::kMmaTF32;
}

// rasterize's `mode`, by the op's value: exact sorted compositing, sort-free weighted (OIT).
// Python's names (gsrender.contract.MODES) are these, read through _C.raster_modes().
constexpr int kNumRasterModes = 2;
inline constexpr const char* kRasterModeNames[kNumRasterModes] = {"sorted", "weighted"};

// The most channels (colour, depth and features, packed) one rasterize call takes; Python reads
// it through _C.contract() (gsrender.contract.MAX_RASTER_CHANNELS).
constexpr int64_t kMaxRasterChannels = 4096;

// rasterize's `precision`: fp32 = the exact scalar loop; the others pick the Tensor Core
// operand type on CUDA ("auto" = fp16) and the fp32 GEMM on the CPU.
enum class RasterPrecision : int { kAuto, kFp32, kTf32, kFp16, kBf16 };
constexpr int kNumRasterPrecisions = 5;
inline constexpr const char* kRasterPrecisionNames[kNumRasterPrecisions] = {"auto", "fp32", "tf32",
                                                                           "fp16", "bf16"};
inline constexpr const char* kRasterPrecisionChoices = "'auto', 'fp32', 'tf32', 'fp16', 'bf16'";

// false when `name` (of length n) is not one of kRasterPrecisionNames
inline bool parse_raster_precision(const char* name, size_t n, RasterPrecision* out) {
  for (int i = 0; i < kNumRasterPrecisions; ++i)
    if (std::strlen(kRasterPrecisionNames[i]) == n &&
        std::strncmp(kRasterPrecisionNames[i], name, n) == 0) {
      *out = static_cast<RasterPrecision>(i);
      return true;
    }
  return false;
}

// Where the call runs: what decides which kernels exist. Host facts only (dtype, tile size, the
// device's compute capability), never tensor values, so planning costs no device sync.
struct RasterTarget {
  bool cuda = false;     // the CUDA backend (else the CPU)
  bool float32 = false;  // float32 inputs (else float64)
  int tile_size = 16;
  int cc_major = 0;  // the CUDA device's compute capability major (0 on the CPU)
};

// The Tensor Core kernels run on float32 inputs, 16×16 tiles (one warp per 8×4 sub-tile),
// sm_80+ (mma.m16n8k16 with f32 accumulators).
constexpr bool mma_runs(const RasterTarget& t) {
  return t.cuda && t.float32 && t.tile_size == 16 && t.cc_major >= 8;
}

// The call's tile grid: each of the C cameras' images cut into tiles_x × tiles_y square tiles of
// tile_size pixels (the last row and column clipped to the image); `count` = C·tiles_y·tiles_x
// tiles, the extent of tile_offsets [C, tiles_y, tiles_x], of the CPU's task list and of the
// CUDA grid (one block per tile).
struct TileGrid {
  int tile_size = 16, tiles_x = 0, tiles_y = 0;
  int64_t count = 0;
  constexpr bool operator==(const TileGrid& o) const {
    return tile_size == o.tile_size && tiles_x == o.tiles_x && tiles_y == o.tiles_y &&
           count == o.count;
  }
};

// The one place the tile grid is computed (tile_size ≥ 1, checked by the callers).
constexpr TileGrid make_tile_grid(int64_t cameras, int64_t width, int64_t height,
                                  int64_t tile_size) {
  const int64_t tx = (width + tile_size - 1) / tile_size, ty = (height + tile_size - 1) / tile_size;
  return {static_cast<int>(tile_size), static_cast<int>(tx), static_cast<int>(ty),
          cameras * ty * tx};
}

// One call's plan: the kernels, the grid, and the device workspace each planned kernel takes
// (bytes of scratch the CUDA launchers of gsrender/launch/rasterize.h carve; 0 for kernels that
// take none: the CUDA scalar ones, and every CPU kernel, which allocates its scratch through
// ATen). The sizes depend on the launchers' layouts (and cub's sort storage), so the CUDA glue
// fills them in with make_raster_plan's result (cuda_glue.h plan_rasterize_cuda) once, in the
// forward; the backward allocates the size the plan names.
struct RasterPlan {
  RasterKernel forward = RasterKernel::kScalar, backward = RasterKernel::kScalar;
  TileGrid grid;
  int64_t forward_workspace = 0, backward_workspace = 0;
};

// The plan as rasterize_fwd returns it (an int64 tensor of kPlanFields on the CPU) and Python
// reads it (_C.raster_plan_fields() names the entries in this order).
constexpr int kPlanFields = 8;
inline constexpr const char* kPlanFieldNames[kPlanFields] = {
    "forward",  "backward", "tile_size",         "tiles_x",
    "tiles_y",  "tiles",    "forward_workspace", "backward_workspace"};

inline void store_plan(const RasterPlan& p, int64_t* out) {
  const int64_t v[kPlanFields] = {static_cast<int64_t>(p.forward), static_cast<int64_t>(p.backward),
                                  p.grid.tile_size, p.grid.tiles_x, p.grid.tiles_y, p.grid.count,
                                  p.forward_workspace, p.backward_workspace};
  for (int i = 0; i < kPlanFields; ++i) out[i] = v[i];
}

// The stored fields back as a plan, unchecked (the kernels' ranges are checked by the caller).
inline RasterPlan load_plan(const int64_t* in) {
  RasterPlan p;
  p.forward = static_cast<RasterKernel>(in[0]), p.backward = static_cast<RasterKernel>(in[1]);
  p.grid = {static_cast<int>(in[2]), static_cast<int>(in[3]), static_cast<int>(in[4]), in[5]};
  p.forward_workspace = in[6], p.backward_workspace = in[7];
  return p;
}

// The one place a rasterize kernel is chosen; `grid` (make_tile_grid, with t.tile_size) rides
// along. Workspaces are 0 here: see RasterPlan.
constexpr RasterPlan make_raster_plan(RasterPrecision p, bool sorted, bool deterministic,
                                      const RasterTarget& t, const TileGrid& grid = {}) {
  using K = RasterKernel;
  if (!t.cuda)  // one backward for every forward (exact fp32/fp64); the scalar loop is sorted only
    return {p == RasterPrecision::kFp32 && sorted ? K::kScalar : K::kMatrix,
            deterministic ? K::kMatrixDet : K::kMatrix, grid};
  K fwd = K::kScalar;  // also where the Tensor Cores do not run (float64, other tiles, < sm_80)
  if (p != RasterPrecision::kFp32 && mma_runs(t))
    fwd = p == RasterPrecision::kBf16 ? K::kMmaBF16
          : p == RasterPrecision::kTf32 ? K::kMmaTF32 : K::kMmaF16;
  // the Tensor Core backward exists for f16 / bf16 (tf32 runs the exact scalar one); a fixed
  // order is the scalar deterministic backward for every forward
  const K bwd = deterministic                            ? K::kScalarDet
                : fwd == K::kMmaF16 || fwd == K::kMmaBF16 ? fwd
                                                          : K::kScalar;
  return {fwd, bwd, grid};
}

// Whether `k` can run as the forward (backward = false) or backward kernel on target t in the
// given mode: a plan that comes from outside (the raw ops) is checked, never re-decided.
constexpr bool raster_kernel_runs(RasterKernel k, bool backward, bool sorted,
                                  const RasterTarget& t) {
  using K = RasterKernel;
  if (!t.cuda)
    return backward ? k == K::kMatrix || k == K::kMatrixDet
                    : k == K::kMatrix || (k == K::kScalar && sorted);
  if (k == K::kScalar) return true;
  if (k == K::kScalarDet) return backward;
  if (k == K::kMmaF16 || k == K::kMmaBF16) return mma_runs(t);
  return k == K::kMmaTF32 && !backward && mma_runs(t);
}

}  // namespace gsrender
