// The launch plan of one rasterize call (docs/design.md §5.6): the user's precision and the
// target (backend, dtype, tile size, compute capability) choose the forward kernel and the
// backward kernel once, in rasterize_fwd, which returns the plan; rasterize_bwd runs the
// backward kernel the plan names and never re-decides. Torch-free (the launchers and
// tools/kernel_driver use it); Python reads the names below through _C.raster_kernels() and
// _C.raster_precisions(), so Python and C++ share one enum.
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

struct RasterPlan {
  RasterKernel forward, backward;
};

// The one place a rasterize kernel is chosen.
constexpr RasterPlan make_raster_plan(RasterPrecision p, bool sorted, bool deterministic,
                                      const RasterTarget& t) {
  using K = RasterKernel;
  if (!t.cuda)  // one backward for every forward (exact fp32/fp64); the scalar loop is sorted only
    return {p == RasterPrecision::kFp32 && sorted ? K::kScalar : K::kMatrix,
            deterministic ? K::kMatrixDet : K::kMatrix};
  K fwd = K::kScalar;  // also where the Tensor Cores do not run (float64, other tiles, < sm_80)
  if (p != RasterPrecision::kFp32 && mma_runs(t))
    fwd = p == RasterPrecision::kBf16 ? K::kMmaBF16
          : p == RasterPrecision::kTf32 ? K::kMmaTF32 : K::kMmaF16;
  // the Tensor Core backward exists for f16 / bf16 (tf32 runs the exact scalar one); a fixed
  // order is the scalar deterministic backward for every forward
  const K bwd = deterministic                            ? K::kScalarDet
                : fwd == K::kMmaF16 || fwd == K::kMmaBF16 ? fwd
                                                          : K::kScalar;
  return {fwd, bwd};
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
