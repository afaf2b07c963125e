// What the huge-page host allocator (gsrender/host_alloc.h, csrc/cpu/host_alloc.cpp) holds, for
// tests and benchmarks: its large outputs' blocks, and the cache of freed ones it reuses.
#pragma once
#include <cstddef>

namespace gsrender {

// Bytes: live (held by tensors), cached (freed and kept for the next allocation of their size,
// which then faults in no page: at most 1 GB, and live + cached never above peak), peak (of live
// since the library loaded); hits: allocations the cache served; blocks: how many it holds.
struct HostBlockStats {
  size_t live, cached, peak, hits, blocks;
};
HostBlockStats host_block_stats();

}  // namespace gsrender
