// Huge-page host allocations for the CPU ops' large outputs (see gsrender/host_alloc.h).
#include "gsrender/host_alloc.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace gsrender {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
// Below this a tensor keeps PyTorch's allocator: glibc serves blocks under its largest mmap
// threshold (32 MB on 64-bit) from the heap once one of that size was freed, so a loop's
// repeated allocations reuse touched memory and fault no page at all (measured: a 1M-Gaussian
// forward's 4–16 MB arrays faulted more as fresh huge pages than on the heap). Larger blocks
// are always a fresh mmap, faulted page by page and unmapped on free: those gain.
constexpr size_t kHugeAllocMin = size_t(32) << 20;

void free_host(void* p) { std::free(p); }

struct HugePageAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    if (n < kHugeAllocMin) return c10::GetCPUAllocator()->allocate(n);
    void* p = nullptr;
    if (posix_memalign(&p, kHugePage, n) != 0) throw std::bad_alloc();
    // Advice only: where THP is off (or madvise fails) the block keeps 4 KB pages.
    (void)madvise(p, n, MADV_HUGEPAGE);
    return {p, p, &free_host, c10::Device(c10::DeviceType::CPU)};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

HugePageAllocator& huge_allocator() {
  static HugePageAllocator a;
  return a;
}

}  // namespace

at::Tensor empty_host(at::IntArrayRef sizes, const at::TensorOptions& opts) {
  TORCH_CHECK(opts.device().is_cpu(), "empty_host: a CPU tensor, got ", opts.device());
  return at::detail::empty_generic(sizes, &huge_allocator(),
                                   c10::DispatchKeySet(c10::DispatchKey::CPU),
                                   c10::typeMetaToScalarType(opts.dtype()), c10::nullopt);
}

at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& opts) {
  return opts.device().is_cpu() ? empty_host(sizes, opts) : at::empty(sizes, opts);
}

}  // namespace gsrender
