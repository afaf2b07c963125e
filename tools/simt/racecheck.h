// The SIMT race check (build.sh --simt --racecheck, -DGSR_SIMT_RACECHECK): what compute-sanitizer's
// racecheck / synccheck would report on a GPU, found on the CPU. The kernel translation units are
// compiled with g++'s -fsanitize=thread instrumentation, whose per-access callbacks
// (__tsan_read4, __tsan_write16, …) racecheck.cpp implements instead of the TSan runtime; the
// emulated ldmatrix, cp.async and atomics report their accesses through the hooks below. No
// kernel source changes: nvcc never sees any of this.
//
// Model (within one block; every block starts with a clean shadow): each byte a thread of the
// block touches (shared memory and global memory alike; thread stacks are private) keeps its last
// write and its recent readers, each with thread, block-barrier epoch and the thread's warp-sync
// count. Two accesses of different threads, at least one a write and not both atomic, conflict
// unless a block barrier (__syncthreads*) completed between them, or, for lanes of one warp, a
// __syncwarp whose mask held both. Shuffles, votes, mma and ldmatrix are not memory barriers
// (CUDA documents none for them), so they do not order accesses. An unordered write / write pair
// that leaves the byte as the first write left it (every writer stores the same value, a benign
// race) is not reported. A conflict aborts the launch with both accesses' source lines (file:line
// and the inline chain, by addr2line).
#pragma once
#include <cstddef>

namespace gsr_simt {
namespace race {

// Scheduler events (simt.cpp).
void begin_block(int threads);
void end_block();  // from the scheduler: settles what waits for the block's end (may throw)
void enter_thread(int tid, const void* stack_lo, const void* stack_hi);
void leave_thread();
void block_barrier();
void warp_sync(int warp, unsigned mask);
void note_alloc(const void* p, size_t bytes);
void note_free(const void* p);

// Accesses the instrumentation cannot see; pc: the instruction that made it (the caller's
// return address; nullptr: the hook's own caller).
void access(const void* p, size_t bytes, bool write, bool atomic, const void* pc);
// ldmatrix / cp.async emulation (simt_ptx.h): records a read (write) made at the caller's line.
void read_here(const void* p, size_t bytes);
void write_here(const void* p, size_t bytes);

}  // namespace race
}  // namespace gsr_simt
