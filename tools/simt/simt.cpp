// The SIMT scheduler and the host CUDA runtime of tools/simt (see simt.h for the model).
//
// Context switch: a few instructions of x86-64 assembly (callee-saved registers, MXCSR and the
// x87 control word, then the stack pointer) — ucontext's swapcontext makes a sigprocmask system
// call per switch; GSR_SIMT_UCONTEXT=1 at compile time selects it (any POSIX host) to compare.
#include <sys/mman.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "simt.h"
#if GSR_SIMT_RACECHECK
#include "racecheck.h"
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__) && !defined(GSR_SIMT_UCONTEXT)
#define GSR_SIMT_UCONTEXT 1
#endif
#if GSR_SIMT_UCONTEXT
#include <ucontext.h>
#endif

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace gsr_simt {
namespace {

#if !GSR_SIMT_UCONTEXT
// gsr_simt_switch(&save_sp, new_sp): saves the caller's context on its stack, stores its stack
// pointer in *save_sp and resumes the context whose stack pointer is new_sp.
extern "C" void gsr_simt_switch(void** save_sp, void* new_sp);
extern "C" void gsr_simt_entry();
asm(R"(
  .text
  .globl gsr_simt_switch
  .type gsr_simt_switch,@function
gsr_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gsr_simt_switch,.-gsr_simt_switch
  .globl gsr_simt_entry
  .type gsr_simt_entry,@function
gsr_simt_entry:
  movq %r12, %rdi
  call *%r13
  ud2
  .size gsr_simt_entry,.-gsr_simt_entry
)");
#endif

constexpr size_t kStackBytes = size_t(256) << 10;  // per thread (kernels keep ~KBs of locals)
constexpr size_t kGuard = 4096;

enum class State { kRunnable, kWaiting, kDone };

struct Thread {
#if GSR_SIMT_UCONTEXT
  ucontext_t ctx;
#else
  void* sp = nullptr;
#endif
  char* stack = nullptr;
  State state = State::kRunnable;
  Arrival wait{};
  uint3 idx{};
  std::vector<AsyncCopy> uncommitted;
  std::vector<std::vector<AsyncCopy>> groups;  // committed, oldest first
};

struct Abort : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Block {
  std::vector<Thread> threads;
  int n = 0;
  Thread* cur = nullptr;
#if GSR_SIMT_UCONTEXT
  ucontext_t sched;
#else
  void* sched_sp = nullptr;
#endif
  void (*body)(void*) = nullptr;
  void* ctx = nullptr;
  std::string error;  // set by a thread that failed (then it switches back for good)
  std::vector<char> smem;
};
Block g;

std::string g_last_error_msg;
cudaError_t g_last_error = cudaSuccess;

// AddressSanitizer must know which stack runs (the --asan build): each switch is announced
// (start) and confirmed on the other side (finish).
#if defined(__SANITIZE_ADDRESS__)
void* g_asan_fake = nullptr;  // unused without detect_stack_use_after_return
const void* g_sched_bottom = nullptr;
size_t g_sched_size = 0;
void asan_arrived_in_thread() {
  __sanitizer_finish_switch_fiber(nullptr, &g_sched_bottom, &g_sched_size);
}
#else
void asan_arrived_in_thread() {}
#endif

void to_scheduler(Thread& t) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(t.state == State::kDone ? nullptr : &g_asan_fake, g_sched_bottom,
                                 g_sched_size);
#endif
#if GSR_SIMT_UCONTEXT
  swapcontext(&t.ctx, &g.sched);
#else
  gsr_simt_switch(&t.sp, g.sched_sp);
#endif
  asan_arrived_in_thread();
}

void resume(Thread& t) {
  g.cur = &t;
  threadIdx = t.idx;
#if GSR_SIMT_RACECHECK
  race::enter_thread(static_cast<int>(&t - g.threads.data()), t.stack + kGuard,
                     t.stack + kGuard + kStackBytes);
#endif
#if defined(__SANITIZE_ADDRESS__)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, t.stack + kGuard, kStackBytes);
#endif
#if GSR_SIMT_UCONTEXT
  swapcontext(&g.sched, &t.ctx);
#else
  gsr_simt_switch(&g.sched_sp, t.sp);
#endif
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
#if GSR_SIMT_RACECHECK
  race::leave_thread();
#endif
  g.cur = nullptr;
}

void run_copies(const std::vector<AsyncCopy>& v) {
  for (const AsyncCopy& c : v) {
#if GSR_SIMT_RACECHECK
    race::access(c.src, static_cast<size_t>(c.bytes), false, false, c.pc);
    race::access(c.dst, static_cast<size_t>(c.bytes + c.zero_fill), true, false, c.pc);
#endif
    std::memcpy(c.dst, c.src, static_cast<size_t>(c.bytes));
    std::memset(static_cast<char*>(c.dst) + c.bytes, 0, static_cast<size_t>(c.zero_fill));
  }
}

void thread_main() {
  asan_arrived_in_thread();
  Thread& t = *g.cur;
  g.body(g.ctx);
  // a thread's outstanding cp.async copies still land
  run_copies(t.uncommitted);
  for (const auto& grp : t.groups) run_copies(grp);
  t.uncommitted.clear(), t.groups.clear();
  t.state = State::kDone;
  to_scheduler(t);
  std::abort();  // a finished thread is never resumed
}

#if GSR_SIMT_UCONTEXT
void entry_u() { thread_main(); }
#else
extern "C" void gsr_simt_thread_main(void*) { thread_main(); }
#endif

char* new_stack() {
  void* p = mmap(nullptr, kStackBytes + kGuard, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("SIMT: cannot map a thread stack");
  mprotect(p, kGuard, PROT_NONE);  // overflow faults instead of corrupting a neighbour
  return static_cast<char*>(p);
}

void init_thread(Thread& t, uint3 idx) {
  if (!t.stack) t.stack = new_stack();
  t.state = State::kRunnable;
  t.idx = idx;
  t.uncommitted.clear(), t.groups.clear();
#if defined(__SANITIZE_ADDRESS__)
  // a thread abandoned by an aborted launch leaves its frames' redzones poisoned
  __asan_unpoison_memory_region(t.stack + kGuard, kStackBytes);
#endif
  char* top = t.stack + kStackBytes + kGuard;
#if GSR_SIMT_UCONTEXT
  getcontext(&t.ctx);
  t.ctx.uc_stack.ss_sp = t.stack + kGuard;
  t.ctx.uc_stack.ss_size = kStackBytes;
  t.ctx.uc_link = nullptr;
  makecontext(&t.ctx, entry_u, 0);
#else
  // the frame gsr_simt_switch pops: MXCSR / x87 control word, r15 … rbp, then the return address
  uintptr_t x = (reinterpret_cast<uintptr_t>(top) - 64) & ~uintptr_t(15);
  uint64_t* s = reinterpret_cast<uint64_t*>(x);
  s[-1] = reinterpret_cast<uint64_t>(&gsr_simt_entry);
  s[-2] = 0;                                                      // rbp
  s[-3] = 0;                                                      // rbx
  s[-4] = 0;                                                      // r12: argument
  s[-5] = reinterpret_cast<uint64_t>(&gsr_simt_thread_main);     // r13: function
  s[-6] = 0, s[-7] = 0;                                           // r14, r15
  uint32_t csr[2];
  asm volatile("stmxcsr %0" : "=m"(csr[0]));
  asm volatile("fnstcw %0" : "=m"(csr[1]));
  std::memcpy(&s[-8], csr, 8);
  t.sp = &s[-8];
#endif
}

std::string where(const Arrival& a) {
  return std::string(a.kind) + " (" + a.file + ":" + std::to_string(a.line) + ")";
}

std::string hex(unsigned m) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", m);
  return b;
}

// Completes one collective of warp w whose mask's lanes have all arrived at it (lanes with
// disjoint masks may wait at different collectives: each completes on its own); false if none
// can complete yet. A lane of a pending mask that exited can never arrive: that aborts at once.
bool try_complete_warp(int w) {
  const int lo = 32 * w, hi = std::min(g.n, lo + 32);
  unsigned tried = 0;  // lanes whose collective was tried already
  for (int first = lo; first < hi; ++first) {
    const Thread& f = g.threads[first];
    if (f.state != State::kWaiting || f.wait.scope != Scope::kWarp || ((tried >> (first - lo)) & 1u))
      continue;
    const Arrival& a = f.wait;
    void* recs[32] = {};
    bool ready = true;
    for (int l = 0; l < 32 && ready; ++l) {
      if (!((a.mask >> l) & 1u)) continue;
      const int i = lo + l;
      if (i >= hi)
        throw Abort("warp " + std::to_string(w) + ": " + where(a) + " mask " + hex(a.mask) +
                    " names lane " + std::to_string(l) + ", which the block (" +
                    std::to_string(g.n) + " threads) does not have");
      const Thread& t = g.threads[i];
      if (t.state == State::kDone)
        throw Abort("warp " + std::to_string(w) + ": lane " + std::to_string(l) +
                    " exited while lane " + std::to_string(first - lo) + " waits for it at " +
                    where(a) + " mask " + hex(a.mask));
      ready = t.state == State::kWaiting && t.wait.scope == Scope::kWarp &&
              std::strcmp(t.wait.kind, a.kind) == 0 && t.wait.mask == a.mask;
      if (ready) tried |= 1u << l;  // this candidate speaks for them too
      recs[l] = t.wait.rec;
    }
    if (!ready) continue;
    a.combine(recs, 32, a.mask);
#if GSR_SIMT_RACECHECK
    if (std::strcmp(a.kind, "__syncwarp") == 0) race::warp_sync(w, a.mask);
#endif
    for (int l = 0; l < 32; ++l)
      if ((a.mask >> l) & 1u) g.threads[lo + l].state = State::kRunnable;
    return true;
  }
  return false;
}

// Completes the block barrier if every live thread waits at one; false otherwise.
bool try_complete_barrier() {
  const Arrival* a = nullptr;
  int live = 0;
  for (int i = 0; i < g.n; ++i) {
    const Thread& t = g.threads[i];
    if (t.state == State::kDone) continue;
    ++live;
    if (t.state != State::kWaiting || t.wait.scope != Scope::kBlock) return false;
    if (!a) {
      a = &t.wait;
    } else if (a->line != t.wait.line || std::strcmp(a->file, t.wait.file) != 0 ||
               std::strcmp(a->kind, t.wait.kind) != 0) {
      throw Abort("divergent barriers: a thread waits at " + where(*a) + ", thread " +
                  std::to_string(i) + " at " + where(t.wait));
    }
  }
  if (!a) return false;
  std::vector<void*> recs(g.n, nullptr);
  for (int i = 0; i < g.n; ++i)
    if (g.threads[i].state == State::kWaiting) recs[i] = g.threads[i].wait.rec;
  a->combine(recs.data(), g.n, 0);
#if GSR_SIMT_RACECHECK
  race::block_barrier();
#endif
  for (int i = 0; i < g.n; ++i)
    if (g.threads[i].state == State::kWaiting) g.threads[i].state = State::kRunnable;
  (void)live;
  return true;
}

// Names every waiting thread, runs of consecutive threads at the same collective merged.
std::string deadlock_report() {
  std::string s = "deadlock (no collective can complete; divergent collectives or a barrier "
                  "some threads never reach):";
  for (int i = 0; i < g.n;) {
    const Thread& t = g.threads[i];
    int j = i + 1;
    auto same = [&](const Thread& u) {
      return u.state == t.state && (t.state != State::kWaiting ||
                                    (u.wait.line == t.wait.line && u.wait.kind == t.wait.kind &&
                                     u.wait.mask == t.wait.mask));
    };
    while (j < g.n && same(g.threads[j])) ++j;
    s += " threads " + std::to_string(i) + "-" + std::to_string(j - 1) +
         (t.state == State::kDone ? std::string(" exited")
                                  : " wait at " + where(t.wait) +
                                        (t.wait.scope == Scope::kWarp ? " mask " + hex(t.wait.mask)
                                                                      : std::string())) +
         ";";
    i = j;
  }
  return s;
}

void run_block() {
  const int warps = (g.n + 31) / 32;
  for (;;) {
    bool progress = false, live = false;
    for (int w = 0; w < warps; ++w) {
      const int lo = 32 * w, hi = std::min(g.n, lo + 32);
      for (;;) {
        for (int i = lo; i < hi; ++i) {
          if (g.threads[i].state != State::kRunnable) continue;
          resume(g.threads[i]);
          progress = true;
          if (!g.error.empty()) throw Abort(g.error);
        }
        if (!try_complete_warp(w)) break;
        progress = true;
      }
      for (int i = lo; i < hi; ++i) live = live || g.threads[i].state != State::kDone;
    }
    if (!live) return;
    if (try_complete_barrier()) continue;
    if (!progress) throw Abort(deadlock_report());
  }
}

}  // namespace

void arrive(const Arrival& a) {
  Thread& t = *g.cur;
  t.wait = a;
  t.state = State::kWaiting;
  to_scheduler(t);
}

int lane_id() { return static_cast<int>((g.cur - g.threads.data()) % 32); }

void fail(const char* fmt, ...) {
  char buf[4096];  // race reports name two inline chains
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (!g.cur) throw Abort(buf);  // in a combine (run by the scheduler)
  g.error = std::string("thread ") + std::to_string(g.cur - g.threads.data()) + ": " + buf;
  Thread& t = *g.cur;
  t.state = State::kDone;
  to_scheduler(t);
  std::abort();
}

void async_issue(AsyncCopy c) {
  c.pc = __builtin_return_address(0);  // in the kernel: the cp.async wrapper is inlined there
#if GSR_SIMT_RACECHECK
  // the copy may land any time until its wait: it conflicts with what precedes the issue too
  race::access(c.dst, static_cast<size_t>(c.bytes + c.zero_fill), true, false, c.pc);
#endif
  g.cur->uncommitted.push_back(c);
}
void async_commit() {
  Thread& t = *g.cur;
  t.groups.push_back(std::move(t.uncommitted));
  t.uncommitted.clear();
}
void async_wait(int pending) {
  Thread& t = *g.cur;
  // the copies complete as late as the program allows, so reading a buffer before its wait
  // sees stale data (a missing wait shows up as a wrong result)
  while (static_cast<int>(t.groups.size()) > pending) {
    run_copies(t.groups.front());
    t.groups.erase(t.groups.begin());
  }
}

void vote_combine(void* const* recs, int, unsigned mask) {
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l)
    if (recs[l] && static_cast<VoteRec*>(recs[l])->pred) bits |= 1u << l;
  for (int l = 0; l < 32; ++l)
    if (recs[l]) static_cast<VoteRec*>(recs[l])->out = bits & mask;
}
unsigned vote(unsigned mask, int pred, const char* kind, const char* file, int line) {
  if (!((mask >> lane_id()) & 1u))
    fail("%s at %s:%d: the calling lane %d is not in the mask 0x%08x", kind, file, line,
         lane_id(), mask);
  VoteRec r{pred != 0, 0};
  arrive({Scope::kWarp, kind, mask, file, line, &r, &vote_combine});
  return r.out;
}
void bar_combine(void* const* recs, int n, unsigned) {
  int count = 0;
  for (int i = 0; i < n; ++i)
    if (recs[i]) count += static_cast<BarRec*>(recs[i])->pred != 0;
  for (int i = 0; i < n; ++i)
    if (recs[i]) static_cast<BarRec*>(recs[i])->count = count,
                 static_cast<BarRec*>(recs[i])->any = count > 0;
}
BarRec barrier(int pred, const char* kind, const char* file, int line) {
  BarRec r{pred, 0, 0};
  arrive({Scope::kBlock, kind, 0, file, line, &r, &bar_combine});
  return r;
}

void* dynamic_shared() { return g.smem.data(); }

void run_grid(dim3 grid, dim3 block, size_t smem, void (*body)(void*), void* ctx) {
  if (g_last_error != cudaSuccess) return;  // an earlier launch failed and nobody looked
  const long long n = 1LL * block.x * block.y * block.z;
  if (n < 1 || n > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
    g_last_error = cudaErrorInvalidValue;
    g_last_error_msg = "invalid launch configuration: grid " + std::to_string(grid.x) + "×" +
                       std::to_string(grid.y) + "×" + std::to_string(grid.z) + ", block " +
                       std::to_string(n) + " threads";
    return;
  }
  g.n = static_cast<int>(n);
  if (static_cast<int>(g.threads.size()) < g.n) g.threads.resize(g.n);
  g.body = body, g.ctx = ctx;
  g.smem.assign(smem, 0);
  gridDim = grid, blockDim = block;
  try {
    for (unsigned bz = 0; bz < grid.z; ++bz)
      for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
          blockIdx = {bx, by, bz};
          for (int i = 0; i < g.n; ++i)
            init_thread(g.threads[i], {static_cast<unsigned>(i % block.x),
                                       static_cast<unsigned>(i / block.x % block.y),
                                       static_cast<unsigned>(i / (block.x * block.y))});
          g.error.clear();
#if GSR_SIMT_RACECHECK
          race::begin_block(g.n);
#endif
          run_block();
#if GSR_SIMT_RACECHECK
          race::end_block();
#endif
        }
  } catch (const Abort& e) {
    g_last_error = cudaErrorLaunchFailure;
    g_last_error_msg = "SIMT launch aborted in block (" + std::to_string(blockIdx.x) + ", " +
                       std::to_string(blockIdx.y) + ", " + std::to_string(blockIdx.z) +
                       "): " + e.what();
    std::fprintf(stderr, "gsr_simt: %s\n", g_last_error_msg.c_str());
    g.error.clear();
    g.cur = nullptr;
  }
}

}  // namespace gsr_simt

// ---- runtime API -----------------------------------------------------------------------------
using gsr_simt::g_last_error;
using gsr_simt::g_last_error_msg;

cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;  // not sticky: the next case runs on a clean "device"
  return e;
}
cudaError_t cudaPeekAtLastError() { return g_last_error; }
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
  }
  return "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t e) {
  if (e != cudaSuccess && !g_last_error_msg.empty()) return g_last_error_msg.c_str();
  return cudaGetErrorName(e);
}
cudaError_t cudaMalloc(void** p, size_t bytes) {
  // exactly `bytes` (256-aligned like cudaMalloc), so the ASan build sees a read past the end
  if (posix_memalign(p, 256, bytes ? bytes : 1) != 0) return *p = nullptr, cudaErrorMemoryAllocation;
#if GSR_SIMT_RACECHECK
  gsr_simt::race::note_alloc(*p, bytes);
#endif
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
#if GSR_SIMT_RACECHECK
  gsr_simt::race::note_free(p);
#endif
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind k,
                            cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, k);
}
cudaError_t cudaMemset(void* p, int v, size_t bytes) {
  if (bytes) std::memset(p, v, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int v, size_t bytes, cudaStream_t) {
  return cudaMemset(p, v, bytes);
}
cudaError_t cudaStreamCreate(cudaStream_t* s) {
  *s = nullptr;  // launches run synchronously: one (null) stream
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaPeekAtLastError(); }
cudaError_t cudaDeviceSynchronize() { return cudaPeekAtLastError(); }
cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "gsrender SIMT (host CPU, sm_80 semantics)");
  p->major = 8, p->minor = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  *v = a == cudaDevAttrComputeCapabilityMajor ? 8 : 0;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 0;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = 0;
  return cudaSuccess;
}
