// gsrender SIMT: a host stand-in for the CUDA runtime and built-ins, so the unchanged kernel
// translation units (csrc/cuda/*_kernel.cu) compile with g++ (-DGSR_SIMT, this folder first
// on the include path) and run on the CPU (docs/cuda.md "SIMT CPU runtime").
//
// Execution model: a launch runs its blocks one after another; the threads of a block are
// cooperative coroutines (one stack each) that run until they reach a collective (a block
// barrier, a warp shuffle / vote / __syncwarp, or a warp-wide PTX instruction emulated in
// simt_ptx.h), where they yield. A collective completes when every thread of its scope has
// arrived: every live thread of the block for a barrier, every lane of the mask for a warp
// collective. A lane that exits while its warp waits for it, barriers at different source lines
// or a state where no collective can complete (a deadlock) abort the launch with a message
// naming the threads and source lines; the launch then reports cudaErrorLaunchFailure.
// Blocks run serially, so __shared__ is a function-local static and atomics are plain updates.
#pragma once
#ifndef GSR_SIMT
#error "tools/simt is the host SIMT build's CUDA stand-in: compile with -DGSR_SIMT"
#endif
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- qualifiers ----------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__ static

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
// The built-in indices of the running thread (set by the scheduler before it resumes a thread).
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
constexpr int warpSize = 32;

// ---- runtime API types ---------------------------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorLaunchFailure = 719,
  cudaErrorNoDevice = 100,
};
using cudaError = cudaError_t;
using cudaStream_t = struct CUstream_st*;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaDeviceAttr {
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76
};
struct cudaDeviceProp {
  char name[256];
  int major, minor;
};

cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaMalloc(void** p, size_t bytes);
template <class T>
cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
cudaError_t cudaFree(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaGetDevice(int* dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int dev);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int dev);
cudaError_t cudaRuntimeGetVersion(int* v);
cudaError_t cudaDriverGetVersion(int* v);

namespace gsr_simt {

// ---- collectives ---------------------------------------------------------------------------
enum class Scope { kWarp, kBlock };

// One thread's arrival at a collective: what it is (kind: the intrinsic's name), its mask
// (warp scope), where (file:line), and the thread's own operands / results (rec). When every
// thread of the scope has arrived, combine runs once with the records of the participating
// lanes (recs[lane], nullptr for lanes outside the mask; block scope: recs[thread]).
using Combine = void (*)(void* const* recs, int n, unsigned mask);
struct Arrival {
  Scope scope;
  const char* kind;
  unsigned mask;
  const char* file;
  int line;
  void* rec;
  Combine combine;
};
// Blocks the calling thread at the collective until it completes (the combine has run).
void arrive(const Arrival& a);
// The calling thread's lane (threadIdx linearised % 32).
int lane_id();
// Aborts the running launch with a message (from a thread: no return).
[[noreturn]] void fail(const char* fmt, ...);

// Per-thread cp.async state (simt_ptx.h): copies issued and not yet committed / completed.
struct AsyncCopy {
  void* dst;
  const void* src;
  int bytes, zero_fill;
  const void* pc;  // the issuing instruction (race reports)
};
void async_issue(AsyncCopy c);
void async_commit();
void async_wait(int pending_groups);

// ---- launching -----------------------------------------------------------------------------
// Runs body(ctx) as every thread of every block of the grid; returns false (with the message
// stored for cudaGetLastError / cudaGetErrorString) when a launch aborted.
void run_grid(dim3 grid, dim3 block, size_t smem, void (*body)(void*), void* ctx);
// The dynamic shared memory of the running block (smem bytes of the launch, 16-aligned).
void* dynamic_shared();

template <class... P>
struct Launch {
  void (*kernel)(P...);
  dim3 grid, block;
  size_t smem;
  template <class... A>
  void operator()(A&&... a) const {
    // the arguments are copied once per launch, as CUDA copies kernel parameters; every thread
    // then receives its own by-value copies
    struct Ctx {
      void (*k)(P...);
      std::tuple<std::decay_t<P>...> args;
    } ctx{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(a)...)};
    run_grid(grid, block, smem,
             [](void* c) {
               Ctx& x = *static_cast<Ctx*>(c);
               std::apply(x.k, x.args);
             },
             &ctx);
  }
};
template <class... P>
Launch<P...> launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t) {
  return Launch<P...>{k, grid, block, smem};
}

// ---- the collective intrinsics ---------------------------------------------------------------
template <class T>
struct ShflRec {
  T v, out;
  int arg, width;
  int mode;  // 0 idx, 1 up, 2 down, 3 xor
};
template <class T>
void shfl_combine(void* const* recs, int, unsigned mask) {
  ShflRec<T>* r[32];
  for (int l = 0; l < 32; ++l) r[l] = static_cast<ShflRec<T>*>(recs[l]);
  for (int lane = 0; lane < 32; ++lane) {
    if (!r[lane]) continue;
    ShflRec<T>& q = *r[lane];
    // PTX shfl.sync: c = ((32 − width) << 8) | (up ? 0 : 31), segmask = c[12:8]
    const int seg = (32 - q.width) & 31;
    const int min_lane = lane & seg, max_lane = min_lane | (q.mode == 1 ? 0 : (31 & ~seg));
    int j;
    bool ok;
    switch (q.mode) {
      case 1: j = lane - q.arg, ok = j >= max_lane; break;
      case 2: j = lane + q.arg, ok = j <= max_lane; break;
      case 3: j = lane ^ q.arg, ok = j <= max_lane; break;
      default: j = min_lane | (q.arg & ~seg), ok = j <= max_lane; break;
    }
    if (!ok) j = lane;
    j &= 31;
    if (!((mask >> j) & 1u))
      fail("__shfl*_sync: lane %d reads lane %d, which is not in the mask 0x%08x", lane, j, mask);
    q.out = r[j]->v;
  }
  for (int lane = 0; lane < 32; ++lane)
    if (r[lane]) r[lane]->v = r[lane]->out;
}

template <class T>
T shfl(unsigned mask, T v, int arg, int width, int mode, const char* kind, const char* file,
       int line) {
  if (width < 1 || width > 32 || (width & (width - 1)))
    fail("%s at %s:%d: width %d is not a power of two in [1, 32]", kind, file, line, width);
  ShflRec<T> rec{v, v, arg, width, mode};
  arrive({Scope::kWarp, kind, mask, file, line, &rec, &shfl_combine<T>});
  return rec.v;
}

struct VoteRec {
  int pred;
  unsigned out;
};
void vote_combine(void* const* recs, int n, unsigned mask);
unsigned vote(unsigned mask, int pred, const char* kind, const char* file, int line);
struct BarRec {
  int pred;
  int count, any;
};
void bar_combine(void* const* recs, int n, unsigned mask);
BarRec barrier(int pred, const char* kind, const char* file, int line);

}  // namespace gsr_simt

#define GSR_SIMT_LOC const char *gsr_file = __builtin_FILE(), int gsr_line = __builtin_LINE()

template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = warpSize, GSR_SIMT_LOC) {
  return gsr_simt::shfl(mask, v, src, width, 0, "__shfl_sync", gsr_file, gsr_line);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = warpSize, GSR_SIMT_LOC) {
  return gsr_simt::shfl(mask, v, static_cast<int>(d), width, 1, "__shfl_up_sync", gsr_file,
                        gsr_line);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = warpSize, GSR_SIMT_LOC) {
  return gsr_simt::shfl(mask, v, static_cast<int>(d), width, 2, "__shfl_down_sync", gsr_file,
                        gsr_line);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = warpSize, GSR_SIMT_LOC) {
  return gsr_simt::shfl(mask, v, m, width, 3, "__shfl_xor_sync", gsr_file, gsr_line);
}
inline unsigned __ballot_sync(unsigned mask, int pred, GSR_SIMT_LOC) {
  return gsr_simt::vote(mask, pred, "__ballot_sync", gsr_file, gsr_line);
}
inline int __all_sync(unsigned mask, int pred, GSR_SIMT_LOC) {
  return gsr_simt::vote(mask, pred, "__all_sync", gsr_file, gsr_line) == mask;
}
inline int __any_sync(unsigned mask, int pred, GSR_SIMT_LOC) {
  return gsr_simt::vote(mask, pred, "__any_sync", gsr_file, gsr_line) != 0;
}
inline void __syncwarp(unsigned mask = 0xffffffffu, GSR_SIMT_LOC) {
  gsr_simt::vote(mask, 0, "__syncwarp", gsr_file, gsr_line);
}
inline void __syncthreads(GSR_SIMT_LOC) {
  gsr_simt::barrier(0, "__syncthreads", gsr_file, gsr_line);
}
inline int __syncthreads_count(int pred, GSR_SIMT_LOC) {
  return gsr_simt::barrier(pred, "__syncthreads_count", gsr_file, gsr_line).count;
}
inline int __syncthreads_or(int pred, GSR_SIMT_LOC) {
  return gsr_simt::barrier(pred, "__syncthreads_or", gsr_file, gsr_line).any;
}
inline int __syncthreads_and(int pred, GSR_SIMT_LOC) {
  const auto r = gsr_simt::barrier(pred, "__syncthreads_and", gsr_file, gsr_line);
  return r.count == static_cast<int>(blockDim.x * blockDim.y * blockDim.z);
}
#undef GSR_SIMT_LOC

[[noreturn]] inline void __trap() { gsr_simt::fail("__trap()"); }

// ---- scalar built-ins ----------------------------------------------------------------------
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
template <class To, class From>
inline To gsr_simt_bits(From f) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  std::memcpy(&t, &f, sizeof t);
  return t;
}
inline int __float_as_int(float f) { return gsr_simt_bits<int>(f); }
inline unsigned __float_as_uint(float f) { return gsr_simt_bits<unsigned>(f); }
inline float __int_as_float(int i) { return gsr_simt_bits<float>(i); }
inline float __uint_as_float(unsigned u) { return gsr_simt_bits<float>(u); }
inline long long __double_as_longlong(double d) { return gsr_simt_bits<long long>(d); }
inline double __longlong_as_double(long long i) { return gsr_simt_bits<double>(i); }
// IEEE round-to-nearest (the host's arithmetic is IEEE; the build does not contract to FMA)
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline size_t __cvta_generic_to_shared(const void* p) { return reinterpret_cast<size_t>(p); }

// device min / max (CUDA overloads them for every arithmetic type)
template <class A, class B>
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(b) < C(a) ? C(b) : C(a);
}
template <class A, class B>
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(a) < C(b) ? C(b) : C(a);
}

// ---- atomics (blocks and threads run one at a time: plain read-modify-write) ---------------
#if GSR_SIMT_RACECHECK
#include "racecheck.h"
// not instrumented as plain accesses: the race check records one atomic access at the caller
template <class T, class F>
__attribute__((noinline, no_sanitize_thread)) T gsr_simt_rmw(T* p, F f) {
  gsr_simt::race::access(p, sizeof(T), true, true, __builtin_return_address(0));
#else
template <class T, class F>
inline T gsr_simt_rmw(T* p, F f) {
#endif
  const T old = *p;
  *p = f(old);
  return old;
}
template <class T, class V>
inline T atomicAdd(T* p, V v) {
  return gsr_simt_rmw(p, [&](T o) { return T(o + T(v)); });
}
template <class T, class V>
inline T atomicMax(T* p, V v) {
  return gsr_simt_rmw(p, [&](T o) { return T(v) > o ? T(v) : o; });
}
template <class T, class V>
inline T atomicMin(T* p, V v) {
  return gsr_simt_rmw(p, [&](T o) { return T(v) < o ? T(v) : o; });
}
template <class T, class V>
inline T atomicOr(T* p, V v) {
  return gsr_simt_rmw(p, [&](T o) { return T(o | T(v)); });
}
template <class T, class V>
inline T atomicExch(T* p, V v) {
  return gsr_simt_rmw(p, [&](T) { return T(v); });
}

// The launch: <<<grid, block, smem, stream>>> under nvcc, the SIMT scheduler here.
#define GSR_SIMT_LAUNCH(grid, block, smem, stream, ...) \
  ::gsr_simt::launch(__VA_ARGS__, dim3(grid), dim3(block), (smem), (stream))
