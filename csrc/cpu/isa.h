// Run-time choice of the instruction set the CPU kernels run. Code reached from cpu::dispatch —
// and so from every cpu::parallel_for chunk — is compiled three times, for AVX-512F+VL, AVX2+FMA
// and baseline x86-64 (SSE2), and each call runs the copy of the active ISA: the best this CPU runs,
// unless GSRENDER_CPU_ISA (read when the extension loads) or set_cpu_isa() chose another. An ISA
// the CPU cannot run is refused with an error saying what it does run; it is never executed.
// A build may leave copies out (GSR_CPU_ISA_NO_AVX512 / _NO_AVX2 / _NO_BASELINE), which setup.py
// defines for GSRENDER_CPU_ISA_BUILD=native (the host's copy and the baseline one) and =host (the
// host's copy alone: what a first build on a workstation needs, half the kernels to compile);
// choosing a copy left out is refused the same way.
//
// Unlike GCC's target_clones (an ifunc the loader resolves once), the choice can change between
// calls, so the test suite runs the same kernels under every ISA the machine has.
//
// What is compiled per ISA: the dispatched callable and everything it calls whose definition is
// visible in its translation unit (headers, same file), inlined by `flatten`. Not: code in other
// .cpp files, library calls, and the body of an OpenMP / at::parallel_for region opened inside
// the callable (outlined as a function of its own, baseline) — dispatch inside such regions.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "parallel.h"

namespace gsrender {
namespace cpu {

enum class Isa : int { baseline = 0, avx2 = 1, avx512 = 2 };

const char* isa_name(Isa isa);
// The ISAs this CPU and OS can run and this build compiled, best first (never empty: loading
// the extension fails with a clear error when it would be).
std::vector<Isa> runnable_isas();
// The ISA dispatch runs now.
Isa active_isa();
// Whether code compiled for isa has 16-float vector registers (AVX-512's 32 zmm), so a kernel may
// pick a 16-float instantiation at run time; in the other copies such vectors would be emulated
// as 2 (AVX2) or 4 (SSE2) registers each, so they keep 8-float ones.
inline bool wide_vectors(Isa isa) { return isa == Isa::avx512; }
// The copies this build compiled, best first.
std::vector<Isa> built_isas();
// name: "auto" (the best runnable), "avx512", "avx2" or "baseline". Throws std::invalid_argument
// for another name, std::runtime_error for an ISA this CPU cannot run or this build left out (the
// active one is kept).
// `source` names the setting in the message (GSRENDER_CPU_ISA or set_cpu_isa).
Isa set_cpu_isa(const std::string& name, const char* source = "set_cpu_isa");
// set_cpu_isa(GSRENDER_CPU_ISA, or "auto" when it is unset or empty); called at module load.
Isa set_cpu_isa_from_env();

namespace detail {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GSR_CPU_ISA_CLONES 1
#ifndef GSR_CPU_ISA_NO_AVX512
#define GSR_CPU_ISA_AVX512 1
#endif
#ifndef GSR_CPU_ISA_NO_AVX2
#define GSR_CPU_ISA_AVX2 1
#endif
// flatten inlines everything f calls (where the body is visible), so the whole call tree is
// compiled with the clone's target; noinline keeps each clone a function the switch can call.
// The AVX-512 copy targets VL too: with plain avx512f (no EVEX encoding of ymm operations) GCC 12
// widens the 8-float vectors' compares and blends to zmm, and each call from that code into
// glibc's SSE log/exp measured ~130 ns, a register-state transition stall; with VL the copy
// stays in ymm where it can, binning ran 2.7-4x and projection 1.3-2x faster, bitwise equal.
#ifdef GSR_CPU_ISA_AVX512
template <class F>
[[gnu::target("avx512f,avx512vl,fma"), gnu::flatten, gnu::noinline]] void run_avx512(
    const F& f) {
  f();
}
#endif
#ifdef GSR_CPU_ISA_AVX2
template <class F>
[[gnu::target("avx2,fma"), gnu::flatten, gnu::noinline]] void run_avx2(const F& f) {
  f();
}
#endif
#ifndef GSR_CPU_ISA_NO_BASELINE
#define GSR_CPU_ISA_BASELINE 1
// The baseline copy is flattened too, so the three differ in instruction set only.
template <class F>
[[gnu::flatten, gnu::noinline]] void run_baseline(const F& f) {
  f();
}
#endif
#endif
}  // namespace detail

// Runs f() compiled for the active ISA.
template <class F>
inline void dispatch(const F& f) {
#ifdef GSR_CPU_ISA_CLONES
  switch (active_isa()) {
#ifdef GSR_CPU_ISA_AVX512
    case Isa::avx512: return detail::run_avx512(f);
#endif
#ifdef GSR_CPU_ISA_AVX2
    case Isa::avx2: return detail::run_avx2(f);
#endif
#ifdef GSR_CPU_ISA_BASELINE
    case Isa::baseline: return detail::run_baseline(f);
#endif
#if !defined(GSR_CPU_ISA_AVX512) || !defined(GSR_CPU_ISA_AVX2) || !defined(GSR_CPU_ISA_BASELINE)
    default: break;  // a copy this build left out: never active (set_cpu_isa refuses it)
#endif
  }
#else
  f();
#endif
}

// at::parallel_for (parallel.h) whose chunks f(begin, end) run compiled for the active ISA.
template <class F>
inline void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  parallel_range(begin, end, grain, [&](int64_t b, int64_t e) { dispatch([&] { f(b, e); }); });
}

// Tasks [0, n) of uneven cost (a scene's tiles) handed out one at a time: each thread runs
// f(take) once, compiled for the active ISA, and loops `for (int64_t t; (t = take()) < n;)`, so
// no thread idles while another finishes a dense stretch (parallel_for splits the range into
// equal contiguous chunks up front). Each thread's tasks come in increasing order.
template <class F>
inline void parallel_tasks(int64_t n, const F& f) {
  std::atomic<int64_t> next{0};
  const auto take = [&next] { return next.fetch_add(1, std::memory_order_relaxed); };
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(num_threads(), n));
  parallel_range(0, workers, 1, [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) dispatch([&] { f(take); });
  });
}

}  // namespace cpu
}  // namespace gsrender
