// The SIMT race check's shadow memory and the -fsanitize=thread callbacks (racecheck.h has the
// model). Linked only into the --racecheck build, which compiles this file and the scheduler
// without instrumentation.
#include "racecheck.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "simt.h"

namespace gsr_simt {
namespace race {
namespace {

// One access as the shadow keeps it: thread (-1: none), its block-barrier epoch and warp-sync
// count at the time, atomic or not, and the instruction.
struct Access {
  int16_t tid = -1;
  bool atomic = false;
  uint32_t epoch = 0, sync = 0;
  const void* pc = nullptr;
};
constexpr int kReaders = 4;  // enough to hold a witness of every unordered pattern seen so far

struct Cell {
  uintptr_t addr;
  uint32_t gen;  // the block it belongs to (older: empty)
  bool suspect;  // a write / write pair waits for its verdict (Suspect)
  Access write;
  Access reads[kReaders];
};

struct State {
  uint32_t gen = 0, epoch = 0;
  int threads = 0;
  std::vector<uint32_t> sync;                 // [thread] warp-sync count
  std::vector<std::array<uint32_t, 32>> seen;  // [thread][lane]: the lane's sync count it is ordered after
  int cur = -1;
  uintptr_t stack_lo = 0, stack_hi = 0;
  std::vector<Cell> cells = std::vector<Cell>(size_t(1) << 16, Cell{0, 0, false, {}, {}});
  size_t used = 0;
  std::map<uintptr_t, size_t> allocs;  // cudaMalloc'd ranges: global memory
};
State s;

size_t slot_of(uintptr_t a, size_t mask) { return (a * 0x9E3779B97F4A7C15ull >> 20) & mask; }

void grow() {
  std::vector<Cell> old(s.cells.size() * 2, Cell{0, 0, false, {}, {}});
  old.swap(s.cells);
  const size_t mask = s.cells.size() - 1;
  for (const Cell& c : old) {
    if (c.gen != s.gen) continue;
    size_t i = slot_of(c.addr, mask);
    while (s.cells[i].gen == s.gen) i = (i + 1) & mask;
    s.cells[i] = c;
  }
}

Cell& cell(uintptr_t a) {
  if (2 * (s.used + 1) > s.cells.size()) grow();
  const size_t mask = s.cells.size() - 1;
  for (size_t i = slot_of(a, mask);; i = (i + 1) & mask) {
    Cell& c = s.cells[i];
    if (c.gen == s.gen && c.addr == a) return c;
    if (c.gen != s.gen) {
      c = Cell{a, s.gen, false, {}, {}};
      ++s.used;
      return c;
    }
  }
}

// prev happened before the running thread's current point.
bool ordered(const Access& prev) {
  if (prev.tid < 0 || prev.tid == s.cur || prev.epoch < s.epoch) return true;
  if (prev.tid / 32 != s.cur / 32) return false;
  return s.seen[s.cur][prev.tid % 32] > prev.sync;
}

// file:line of pc and the functions it was inlined into (innermost first), by addr2line.
std::string where(const void* pc) {
  char cmd[256];
  std::snprintf(cmd, sizeof cmd, "addr2line -i -e /proc/%d/exe %p 2>/dev/null", getpid(),
                static_cast<const char*>(pc) - 1);
  std::string out;
  if (FILE* f = popen(cmd, "r")) {
    char line[1024];
    int n = 0;
    while (std::fgets(line, sizeof line, f)) {
      std::string l(line);
      l = l.substr(0, l.find(" (discriminator"));
      while (!l.empty() && (l.back() == '\n' || l.back() == ' ')) l.pop_back();
      const size_t cut = l.rfind("/csrc/") != std::string::npos ? l.rfind("/csrc/") + 1
                         : l.rfind("/tools/") != std::string::npos ? l.rfind("/tools/") + 1
                                                                   : 0;
      if (l.compare(cut, 11, "tools/simt/") == 0) continue;  // the emulation's own frames
      if (n++ < 3) out += (out.empty() ? "" : " <- ") + l.substr(cut);
    }
    pclose(f);
  }
  if (out.empty()) {
    char b[32];
    std::snprintf(b, sizeof b, "pc %p", pc);
    out = b;
  }
  return out;
}

std::string hex(uintptr_t a) {
  char b[24];
  std::snprintf(b, sizeof b, "%#" PRIxPTR, a);
  return b;
}

std::string who(int tid) {
  return "thread " + std::to_string(tid) + " (warp " + std::to_string(tid / 32) + ", lane " +
         std::to_string(tid % 32) + ")";
}

const char* space(uintptr_t a) {
  auto it = s.allocs.upper_bound(a);
  if (it != s.allocs.begin() && a < std::prev(it)->first + std::prev(it)->second) return "global";
  return "shared";
}

[[noreturn]] void report(uintptr_t a, const Access& first, bool first_write,
                         const Access& second, bool second_write) {
  const bool same_warp = first.tid / 32 == second.tid / 32;
  const std::string msg =
      std::string("racecheck: ") + (first_write ? "write" : "read") + " / " +
      (second_write ? "write" : "read") + " hazard on " + space(a) + " memory " + hex(a) + ": " +
      (first_write ? "write by " : "read by ") + who(first.tid) + " at " + where(first.pc) +
      "; then " + (second_write ? "write by " : "read by ") + who(second.tid) + " at " +
      where(second.pc) +
      (same_warp ? "; no __syncwarp between them" : "; no __syncthreads between them");
  fail("%s", msg.c_str());
}

// An unordered write after a write is a hazard only if it changed the byte (a flag every writer
// sets to 1 is a benign race): the second
// write's value is known once it has happened, so the pair waits here until the byte's next
// access or the block's end.
struct Suspect {
  uintptr_t a;
  uint8_t before;  // the byte before the second write (the first write's value)
  Access first, second;
};
std::vector<Suspect> suspects;

void settle(uintptr_t a) {
  for (size_t i = 0; i < suspects.size(); ++i) {
    const Suspect q = suspects[i];
    if (q.a != a) continue;
    suspects.erase(suspects.begin() + static_cast<std::ptrdiff_t>(i));
    if (*reinterpret_cast<const uint8_t*>(a) != q.before) report(a, q.first, true, q.second, true);
    return;
  }
}

void touch(uintptr_t a, bool write, bool atomic, const void* pc) {
  Cell& c = cell(a);
  if (c.suspect) settle(a), c.suspect = false;
  const Access me{static_cast<int16_t>(s.cur), atomic, s.epoch, s.sync[s.cur], pc};
  if (c.write.tid >= 0 && !(atomic && c.write.atomic) && !ordered(c.write)) {
    if (!write || atomic || c.write.atomic) report(a, c.write, true, me, write);
    suspects.push_back({a, *reinterpret_cast<const uint8_t*>(a), c.write, me});
    c.suspect = true;
  }
  if (write) {
    for (const Access& r : c.reads)
      if (r.tid >= 0 && !(atomic && r.atomic) && !ordered(r)) report(a, r, false, me, write);
    c.write = me;
    for (Access& r : c.reads) r = Access{};
    return;
  }
  // a read: replace this thread's earlier read, else a stale or empty slot, else the oldest
  Access* slot = nullptr;
  for (Access& r : c.reads)
    if (r.tid == s.cur) slot = &r;
  for (Access& r : c.reads)
    if (!slot && (r.tid < 0 || r.epoch < s.epoch)) slot = &r;
  if (!slot) {
    std::rotate(c.reads, c.reads + 1, c.reads + kReaders);
    slot = &c.reads[kReaders - 1];
  }
  *slot = me;
}

}  // namespace

void end_block() {
  while (!suspects.empty()) settle(suspects.front().a);
}
void begin_block(int threads) {
  ++s.gen, s.used = 0, s.epoch = 0, s.threads = threads;
  s.sync.assign(threads, 1);
  s.seen.assign(threads, std::array<uint32_t, 32>{});
}
void enter_thread(int tid, const void* lo, const void* hi) {
  s.cur = tid;
  s.stack_lo = reinterpret_cast<uintptr_t>(lo), s.stack_hi = reinterpret_cast<uintptr_t>(hi);
}
void leave_thread() { s.cur = -1; }
void block_barrier() { ++s.epoch; }
void warp_sync(int warp, unsigned mask) {
  std::array<uint32_t, 32> joined{};
  for (int l = 0; l < 32; ++l)
    if ((mask >> l) & 1u)
      for (int k = 0; k < 32; ++k) joined[k] = std::max(joined[k], s.seen[32 * warp + l][k]);
  for (int l = 0; l < 32; ++l)
    if ((mask >> l) & 1u) joined[l] = ++s.sync[32 * warp + l];
  for (int l = 0; l < 32; ++l)
    if ((mask >> l) & 1u) s.seen[32 * warp + l] = joined;
}
void note_alloc(const void* p, size_t bytes) { s.allocs[reinterpret_cast<uintptr_t>(p)] = bytes; }
void note_free(const void* p) { s.allocs.erase(reinterpret_cast<uintptr_t>(p)); }

void access(const void* p, size_t bytes, bool write, bool atomic, const void* pc) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (s.cur < 0 || (a >= s.stack_lo && a < s.stack_hi)) return;
  for (size_t i = 0; i < bytes; ++i) touch(a + i, write, atomic, pc);
}
__attribute__((noinline)) void read_here(const void* p, size_t bytes) {
  access(p, bytes, false, false, __builtin_return_address(0));
}
__attribute__((noinline)) void write_here(const void* p, size_t bytes) {
  access(p, bytes, true, false, __builtin_return_address(0));
}

}  // namespace race
}  // namespace gsr_simt

// ---- the -fsanitize=thread instrumentation's callbacks -------------------------------------
// (only the kernel translation units are instrumented; accesses outside a running SIMT thread,
// e.g. the launchers' host code, are ignored by access())
using gsr_simt::race::access;
#define GSR_RACE_PC __builtin_return_address(0)
#define GSR_RACE_SIZED(N)                                                                         \
  extern "C" void __tsan_read##N(void* p) { access(p, N, false, false, GSR_RACE_PC); }          \
  extern "C" void __tsan_write##N(void* p) { access(p, N, true, false, GSR_RACE_PC); }          \
  extern "C" void __tsan_unaligned_read##N(void* p) { access(p, N, false, false, GSR_RACE_PC); } \
  extern "C" void __tsan_unaligned_write##N(void* p) { access(p, N, true, false, GSR_RACE_PC); } \
  extern "C" void __tsan_volatile_read##N(void* p) { access(p, N, false, false, GSR_RACE_PC); }  \
  extern "C" void __tsan_volatile_write##N(void* p) { access(p, N, true, false, GSR_RACE_PC); }
GSR_RACE_SIZED(1)
GSR_RACE_SIZED(2)
GSR_RACE_SIZED(4)
GSR_RACE_SIZED(8)
GSR_RACE_SIZED(16)
#undef GSR_RACE_SIZED
extern "C" void __tsan_read_range(void* p, unsigned long n) {
  access(p, n, false, false, GSR_RACE_PC);
}
extern "C" void __tsan_write_range(void* p, unsigned long n) {
  access(p, n, true, false, GSR_RACE_PC);
}
extern "C" void __tsan_init() {}
extern "C" void __tsan_func_entry(void*) {}
extern "C" void __tsan_func_exit() {}
extern "C" void __tsan_vptr_update(void**, void*) {}
extern "C" void __tsan_vptr_read(void**) {}
// function-local statics' guard reads (the kernels themselves use no C++ atomics)
extern "C" uint8_t __tsan_atomic8_load(const volatile uint8_t* a, int) { return *a; }
extern "C" uint32_t __tsan_atomic32_load(const volatile uint32_t* a, int) { return *a; }
