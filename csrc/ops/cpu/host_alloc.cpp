// Host allocations of 128 KB and more (see gsrender/host_alloc.h): the CPU ops' outputs and
// scratch, and once installed PyTorch's CPU tensors, from a cache of freed blocks that lets a
// render or training loop reuse them instead of faulting in fresh pages.
#include "gsrender/host_alloc.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cpu/host_blocks.h"

namespace gsrender {
namespace {

constexpr size_t kPage = size_t(4) << 10;
constexpr size_t kHugePage = size_t(2) << 20;
// Below kHostBlockMin (128 KB) a tensor keeps PyTorch's allocator. From it on, blocks come from
// the cache: PyTorch's allocator cannot be relied on to reuse them. With THP_MEM_ALLOC_ENABLE=1
// (what `import gsrender` sets) it maps every tensor of 2 MB or more fresh, a huge-page fault each,
// and without it glibc reuses heap blocks below its mmap threshold only once the threshold has
// risen past their size, which depends on what the process freed before: the 1M forward's
// project and sh stages ran 2.8x slower in a fresh process than after other renders. Measured
// (docs/cpu.md, "Memory"): sh_channels_bwd at 100k 17.6 -> 4.1 ms, no page faults left; a
// D = 64 training step 313 / 265 -> 246 / 249 ms. 128 KB is glibc's initial mmap threshold: with the cache installed as PyTorch's
// allocator no large block is freed to glibc, so its threshold stays there, and what the cache
// did not take from 128 KB on would be mapped fresh on every allocation (a D = 0 training step:
// 1500 faults of 4 KB pages).
static_assert(kHostBlockMin == size_t(128) << 10, "glibc's initial mmap threshold");
constexpr size_t kCacheMax = size_t(1) << 30;  // bytes of freed blocks kept at most

class BlockCache;
BlockCache& block_cache();

// Freed blocks kept for the next allocation of (about) their size: each frame of a
// render loop asks for the same outputs again, and a kept block's pages are already faulted in
// and cleared, where a fresh one page-faults and the kernel zeroes every page (clear_page: 18 % of
// a one-thread D = 256 forward's samples). Bounded so that the cache never grows the process much
// beyond what it used anyway: cached ≤ kCacheMax, and live + cached ≤ twice the peak of live
// (kPeakMultiple: blocks are evicted, oldest first, when a fresh allocation would exceed it).
// Thread-safe: ops allocate, and tensors are freed, on any thread; a fork (a data loader's
// workers) takes the lock first, so the child never inherits it held.
class BlockCache {
 public:
  BlockCache() {
    pthread_atfork([] { block_cache().mutex_.lock(); }, [] { block_cache().mutex_.unlock(); },
                   [] { block_cache().mutex_.unlock(); });
  }
  // A block of at least n bytes (n a multiple of its page size): a cached one of n .. n + n/8
  // bytes, or a fresh one.
  void* take(size_t n) {
    std::vector<Block> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto best = blocks_.end();
      for (auto b = blocks_.begin(); b != blocks_.end(); ++b)
        if (b->n >= n && b->n <= n + n / 8 && (best == blocks_.end() || b->n < best->n)) best = b;
      if (best != blocks_.end()) {
        const Block b = *best;
        cached_ -= b.n, live_ += b.n, ++hits_;
        blocks_.erase(best);
        sizes_.emplace(b.p, b.n);
        return b.p;
      }
      live_ += n, ++fresh_;
      peak_ = std::max(peak_, live_);
      evict_locked(kPeakMultiple * peak_ - live_, evicted);
    }
    release(evicted);
    void* p = map_block(n);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!p) {
      live_ -= n;
      throw std::bad_alloc();
    }
    sizes_.emplace(p, n);
    return p;
  }
  // Keeps p if it is a block of this cache (and says so).
  bool give(void* p) {
    std::vector<Block> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = sizes_.find(p);
      if (it == sizes_.end()) return false;
      const size_t n = it->second;
      sizes_.erase(it);
      live_ -= n;  // live + cached unchanged: still within the bound
      blocks_.push_back({p, n});
      cached_ += n;
      evict_locked(kCacheMax, evicted);
    }
    release(evicted);
    return true;
  }
  HostBlockStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {live_, cached_, peak_, hits_, fresh_, blocks_.size()};
  }

 private:
  struct Block {
    void* p;
    size_t n;
  };
  // A loop's allocations come in several sizes at several moments (a training step: the forward's
  // outputs, then the gradients, then a copy the size of the image), so the blocks one iteration
  // reuses add up to more than its peak of live bytes: with live + cached ≤ peak, a D = 64 step
  // evicted and faulted in 8, 20 and 26 MB blocks every step, and a fault clears its pages (on a
  // virtual machine whose host reclaims freed memory, 70-200 ms of system time per step). 1.5 ×
  // peak held the D = 64 and 256 steps' blocks but not the RGB step's at 100k with SH degree 3
  // (1.59 × peak: its 20 MB SH gradient and four more blocks were mapped fresh every step); twice
  // the peak holds all three (docs/cpu.md, "Memory").
  static constexpr size_t kPeakMultiple = 2;
  // Oldest first until cached_ ≤ limit; freed by the caller outside the lock.
  void evict_locked(size_t limit, std::vector<Block>& out) {
    size_t k = 0;
    for (; k < blocks_.size() && cached_ > limit; ++k) cached_ -= blocks_[k].n;
    out.assign(blocks_.begin(), blocks_.begin() + k);
    blocks_.erase(blocks_.begin(), blocks_.begin() + k);
  }
  // Fresh pages straight from the kernel (glibc's heap would keep freed blocks to itself); from
  // one huge page on, huge-page aligned and advised (advice only: where THP is off, or madvise
  // fails, the block keeps 4 KB pages). nullptr if the kernel has no memory for it.
  static void* map_block(size_t n) {
    const size_t align = n >= kHugePage ? kHugePage : kPage;
    void* m = mmap(nullptr, n + align - kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED) return nullptr;
    const uintptr_t a = reinterpret_cast<uintptr_t>(m), p = (a + align - 1) / align * align;
    if (p > a) munmap(m, p - a);  // the slack before and after the aligned block
    if (a + align - kPage > p) munmap(reinterpret_cast<void*>(p + n), a + align - kPage - p);
    if (align == kHugePage) (void)madvise(reinterpret_cast<void*>(p), n, MADV_HUGEPAGE);
    return reinterpret_cast<void*>(p);
  }
  static void release(const std::vector<Block>& blocks) {
    for (const Block& b : blocks) munmap(b.p, b.n);
  }

  std::mutex mutex_;
  std::vector<Block> blocks_;                // cached, oldest first
  std::unordered_map<void*, size_t> sizes_;  // live blocks' sizes
  size_t live_ = 0, cached_ = 0, peak_ = 0, hits_ = 0, fresh_ = 0;
};

// Never destroyed: tensors may be freed after static destructors ran (at interpreter exit).
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;
  return *cache;
}

struct BlockAllocator final : c10::Allocator {
  // Below kHostBlockMin: the CPU allocator PyTorch had when this one was made, kept so that
  // installing this one as PyTorch's (install_host_allocator) leaves small tensors where they were.
  c10::Allocator* const small = c10::GetCPUAllocator();

  c10::DataPtr allocate(size_t n) override {
    if (n < kHostBlockMin) return small->allocate(n);
    void* p = host_block_take(n);
    // context = data (a "simple" pointer, as PyTorch's own allocator makes): raw_allocate and
    // copy-on-write clones take it
    return {p, p, &free_block, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_raw; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  static void free_block(void* p) { host_block_give(p); }
  static void free_raw(void* p);
};

BlockAllocator& block_allocator() {
  static BlockAllocator a;
  return a;
}

void BlockAllocator::free_raw(void* p) {
  if (!block_cache().give(p)) block_allocator().small->raw_deleter()(p);
}

}  // namespace

at::Tensor empty_host(at::IntArrayRef sizes, const at::TensorOptions& opts) {
  TORCH_CHECK(opts.device().is_cpu(), "empty_host: a CPU tensor, got ", opts.device());
  return at::detail::empty_generic(sizes, &block_allocator(),
                                   c10::DispatchKeySet(c10::DispatchKey::CPU),
                                   c10::typeMetaToScalarType(opts.dtype()), c10::nullopt);
}

at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& opts) {
  return opts.device().is_cpu() ? empty_host(sizes, opts) : at::empty(sizes, opts);
}

at::Tensor zeros_output(at::IntArrayRef sizes, const at::TensorOptions& opts) {
  return empty_output(sizes, opts).zero_();
}

void* host_block_take(size_t bytes) {
  const size_t unit = bytes >= kHugePage ? kHugePage : kPage;  // whole (huge) pages: reusable
  return block_cache().take((bytes + unit - 1) / unit * unit);
}

void host_block_give(void* p) { block_cache().give(p); }

HostBlockStats host_block_stats() { return block_cache().stats(); }

void note_cpu_render() {
  static std::atomic<int> renders{0};
  if (renders.fetch_add(1) != 1) return;  // the second render: a loop
  const char* env = std::getenv("GSRENDER_HOST_CACHE");
  if (!(env && std::string_view(env) == "0")) install_host_allocator();
}

bool install_host_allocator() {
  BlockAllocator* a = &block_allocator();
  c10::SetCPUAllocator(a);
  return c10::GetCPUAllocator() == a;
}

}  // namespace gsrender
