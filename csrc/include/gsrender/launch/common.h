// The torch-free CUDA launch layer (docs/cuda.md): every CUDA kernel of gsrender is started by a
// launch_<kernel>(const <Kernel>Args&, [Workspace,] cudaStream_t) declared in these headers,
// with raw device pointers in plain argument structs. Nothing here includes an ATen / torch
// header, so the kernel translation units (csrc/cuda/*_kernel.cu) and tools/kernel_driver build
// with nvcc and the CUDA toolkit alone. The torch glue (csrc/cuda/*.cu: checks, allocation, the
// op registration) calls the same launchers.
//
// Conventions: launchers return the first CUDA error (cudaGetLastError after each launch) and
// never synchronise; outputs documented as "zeroed by the caller" accumulate into memory the
// caller cleared; scratch memory comes in a Workspace whose size the matching
// <kernel>_workspace_bytes(args) returns (the same carve runs for sizing and for launching).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gsrender {
namespace launch {

// Device scratch memory for one launch (any allocator: torch's caching allocator in the glue,
// cudaMalloc in the driver); ptr may be null when bytes is 0.
struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};

// Cuts 256-byte-aligned arrays out of a workspace in call order. With base == nullptr it only
// counts (the sizing pass), so a launcher's layout function is its own size computation.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(int64_t n) {
    used_ = (used_ + 255) / 256 * 256;
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += sizeof(T) * static_cast<size_t>(n > 0 ? n : 0);
    return p;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

}  // namespace launch
}  // namespace gsrender

// Starts a kernel: GSR_LAUNCH(grid, block, smem, stream, kernel)(args...) is exactly
// kernel<<<grid, block, smem, stream>>>(args...) under nvcc, and a launch on the host SIMT
// runtime in the CPU build of the kernels (-DGSR_SIMT, tools/simt). The kernel comes last so that
// template arguments with commas need no parentheses.
#if defined(GSR_SIMT)
#define GSR_LAUNCH GSR_SIMT_LAUNCH
#else
#define GSR_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#endif

// Returns from the enclosing launcher on a CUDA error.
#define GSR_CUDA_TRY(expr)                       \
  do {                                           \
    const cudaError_t gsr_err_ = (expr);         \
    if (gsr_err_ != cudaSuccess) return gsr_err_; \
  } while (0)
