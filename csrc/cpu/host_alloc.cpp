// Huge-page host allocations for the CPU ops' large outputs (see gsrender/host_alloc.h), and the
// cache of freed blocks that lets a render loop reuse them instead of faulting in fresh pages.
#include "gsrender/host_alloc.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "host_blocks.h"

namespace gsrender {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
// Below one huge page a tensor keeps PyTorch's allocator. From it on, blocks come from the cache:
// PyTorch's allocator cannot be relied on to reuse them. With THP_MEM_ALLOC_ENABLE=1 (what
// `import gsrender` sets) it maps every tensor of 2 MB or more fresh, a huge-page fault each,
// and without it glibc reuses heap blocks below its mmap threshold only once the threshold has
// risen past their size, which depends on what the process freed before: the 1M forward's
// project and sh stages ran 2.8x slower in a fresh process than after other renders. Measured
// (docs/cpu.md, "Allocations of 2 MB and more"): sh_channels_bwd at 100k 17.6 -> 4.1 ms, no
// page faults left; a D = 64 training step 313 / 265 -> 246 / 249 ms.
constexpr size_t kHugeAllocMin = kHugePage;
constexpr size_t kCacheMax = size_t(1) << 30;  // bytes of freed blocks kept at most

// Freed huge-page blocks kept for the next allocation of (about) their size: each frame of a
// render loop asks for the same outputs again, and a kept block's pages are already faulted in
// and cleared, where a fresh one page-faults and the kernel zeroes every page (clear_page: 18 % of
// a one-thread D = 256 forward's samples). Bounded so that the cache never grows the process
// beyond what it used anyway: cached ≤ kCacheMax, and live + cached ≤ the peak of live (so
// blocks are evicted, oldest first, when a fresh allocation would exceed it). Thread-safe: ops
// allocate, and tensors are freed, on any thread.
class BlockCache {
 public:
  // A block of n bytes (a multiple of kHugePage): a cached one of n .. n + n/8 bytes (its size
  // in *n), or a fresh one.
  void* take(size_t* n) {
    std::vector<Block> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto best = blocks_.end();
      for (auto b = blocks_.begin(); b != blocks_.end(); ++b)
        if (b->n >= *n && b->n <= *n + *n / 8 && (best == blocks_.end() || b->n < best->n)) best = b;
      if (best != blocks_.end()) {
        void* p = best->p;
        *n = best->n, cached_ -= best->n, live_ += best->n, ++hits_;
        blocks_.erase(best);
        return p;
      }
      live_ += *n;
      peak_ = std::max(peak_, live_);
      evict_locked(peak_ - live_, evicted);
    }
    release(evicted);
    void* p = nullptr;
    if (posix_memalign(&p, kHugePage, *n) != 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      live_ -= *n;
      throw std::bad_alloc();
    }
    // Advice only: where THP is off (or madvise fails) the block keeps 4 KB pages.
    (void)madvise(p, *n, MADV_HUGEPAGE);
    return p;
  }
  void give(void* p, size_t n) {
    std::vector<Block> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_ -= n;  // live + cached unchanged: still ≤ the peak
      blocks_.push_back({p, n});
      cached_ += n;
      evict_locked(kCacheMax, evicted);
    }
    release(evicted);
  }
  HostBlockStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {live_, cached_, peak_, hits_, blocks_.size()};
  }

 private:
  struct Block {
    void* p;
    size_t n;
  };
  // Oldest first until cached_ ≤ limit; freed by the caller outside the lock.
  void evict_locked(size_t limit, std::vector<Block>& out) {
    size_t k = 0;
    for (; k < blocks_.size() && cached_ > limit; ++k) cached_ -= blocks_[k].n;
    out.assign(blocks_.begin(), blocks_.begin() + k);
    blocks_.erase(blocks_.begin(), blocks_.begin() + k);
  }
  static void release(const std::vector<Block>& blocks) {
    for (const Block& b : blocks) std::free(b.p);
  }

  std::mutex mutex_;
  std::vector<Block> blocks_;  // oldest first
  size_t live_ = 0, cached_ = 0, peak_ = 0, hits_ = 0;
};

// Never destroyed: tensors may be freed after static destructors ran (at interpreter exit).
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;
  return *cache;
}

struct HostBlock {
  void* p;
  size_t n;
};
void free_host(void* ctx) {
  const HostBlock* b = static_cast<const HostBlock*>(ctx);
  block_cache().give(b->p, b->n);
  delete b;
}

struct HugePageAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    if (n < kHugeAllocMin) return c10::GetCPUAllocator()->allocate(n);
    auto b = std::make_unique<HostBlock>();
    b->n = (n + kHugePage - 1) / kHugePage * kHugePage;  // whole huge pages, reusable
    b->p = block_cache().take(&b->n);
    void* p = b->p;
    return {p, b.release(), &free_host, c10::Device(c10::DeviceType::CPU)};
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

at::Tensor zeros_output(at::IntArrayRef sizes, const at::TensorOptions& opts) {
  return empty_output(sizes, opts).zero_();
}

HostBlockStats host_block_stats() { return block_cache().stats(); }

}  // namespace gsrender
