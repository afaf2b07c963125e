// What the huge-page host allocator (gsrender/host_alloc.h, csrc/ops/cpu/host_alloc.cpp) holds, for
// tests and benchmarks: its large outputs' blocks, and the cache of freed ones it reuses.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace gsrender {

// Bytes: live (held by tensors), cached (freed and kept for the next allocation of their size,
// which then faults in no page: at most 1 GB, and live + cached never above 2 × peak), peak (of
// live since the library loaded); hits: allocations the cache served; fresh: those it could not
// (new pages); blocks: how many it holds.
struct HostBlockStats {
  size_t live, cached, peak, hits, fresh, blocks;
};
HostBlockStats host_block_stats();

// Makes the huge-page allocator PyTorch's CPU allocator, so that every CPU tensor of 2 MB or more
// (PyTorch's own ops' too: a training step's gradient copies and sums) reuses the cached blocks;
// smaller tensors keep PyTorch's allocator. False if PyTorch kept another one (set with a higher
// priority). Tensors allocated before keep their allocator.
bool install_host_allocator();

// Called by every CPU raster forward: the second one (a render or training loop) installs the
// allocator, unless GSRENDER_HOST_CACHE=0. Not the first: in a one-off render, blocks freed along
// the way would be kept while later ones are mapped fresh, where the kernel would have handed
// the freed pages out again, and on a virtual machine whose host reclaims free memory other
// pages cost far more to fault in (a 1M × 1080p forward + backward in a fresh process: 3.4-5.2 s
// with the allocator installed at the first op, 2.5-2.7 s without it).
void note_cpu_render();

// The cache's blocks for the CPU ops' own scratch, through HostAlloc. From kHostBlockMin bytes on
// (smaller: operator new); the block is page aligned (2 MB aligned from 2 MB on).
constexpr size_t kHostBlockMin = size_t(128) << 10;
void* host_block_take(size_t bytes);
void host_block_give(void* p);

// A std::vector allocator aligned to A bytes whose large buffers come from the cache, so the
// per-call arrays sized by the scene (binning's keys, the backward's per-Gaussian sums) reuse
// pages the previous call faulted in. (std::allocator does not honour the vector types' alignment
// when they come in as template arguments, and gives plain arrays 16 bytes.)
template <typename T, size_t A = alignof(T)>
struct HostAlloc {
  static_assert(A <= 4096, "host blocks are page aligned");
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = HostAlloc<U, A>;
  };
  HostAlloc() = default;
  template <typename U>
  HostAlloc(const HostAlloc<U, A>&) {}
  T* allocate(size_t n) {
    if (n * sizeof(T) >= kHostBlockMin) return static_cast<T*>(host_block_take(n * sizeof(T)));
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(A)));
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) >= kHostBlockMin)
      host_block_give(p);
    else
      ::operator delete(p, std::align_val_t(A));
  }
  bool operator==(const HostAlloc&) const { return true; }
};
template <typename T>
using HostVector = std::vector<T, HostAlloc<T>>;

}  // namespace gsrender
