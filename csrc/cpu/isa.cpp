// The active CPU ISA (isa.h): what the CPU runs, and the forced choice.
#include "isa.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace gsrender {
namespace cpu {
namespace {

// -1 = not chosen yet: the first active_isa() picks the best runnable one.
std::atomic<int> g_active{-1};

bool cpu_runs(Isa isa) {
#ifdef GSR_CPU_ISA_CLONES
  // __builtin_cpu_supports also checks that the OS saves the wider registers (XCR0).
  switch (isa) {
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("fma");
    case Isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::baseline: return true;
  }
  return false;
#else
  return isa == Isa::baseline;  // one copy only: no clones on this compiler / architecture
#endif
}

bool built(Isa isa) {
  switch (isa) {
#ifdef GSR_CPU_ISA_AVX512
    case Isa::avx512: return true;
#endif
#ifdef GSR_CPU_ISA_AVX2
    case Isa::avx2: return true;
#endif
#ifdef GSR_CPU_ISA_BASELINE
    case Isa::baseline: return true;
#endif
    default: return false;
  }
}

std::string name_list(const std::vector<Isa>& isas) {
  std::string s;
  for (Isa i : isas) s += (s.empty() ? "" : ", ") + std::string(isa_name(i));
  return s;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    case Isa::baseline: return "baseline";
  }
  return "?";
}

std::vector<Isa> built_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::avx512, Isa::avx2, Isa::baseline})
    if (built(i)) out.push_back(i);
  return out;
}

std::vector<Isa> runnable_isas() {
  std::vector<Isa> out;
  for (Isa i : built_isas())
    if (cpu_runs(i)) out.push_back(i);
  // a build of the host's copy alone (GSRENDER_CPU_ISA_BUILD=host) moved to a CPU without it
  if (out.empty())
    throw std::runtime_error("this build has only the " + name_list(built_isas()) +
                             " kernels, which this CPU cannot run: rebuild here, or with "
                             "GSRENDER_CPU_ISA_BUILD=all (every copy)");
  return out;
}

Isa active_isa() {
  const int v = g_active.load(std::memory_order_relaxed);
  if (v >= 0) return static_cast<Isa>(v);
  const Isa best = runnable_isas().front();
  g_active.store(static_cast<int>(best), std::memory_order_relaxed);
  return best;
}

Isa set_cpu_isa(const std::string& name, const char* source) {
  Isa want;
  if (name == "auto") {
    want = runnable_isas().front();
  } else if (name == "avx512") {
    want = Isa::avx512;
  } else if (name == "avx2") {
    want = Isa::avx2;
  } else if (name == "baseline") {
    want = Isa::baseline;
  } else {
    throw std::invalid_argument(std::string(source) + ": unknown CPU ISA '" + name +
                                "'; choose auto, avx512, avx2 or baseline");
  }
  if (!cpu_runs(want))
    throw std::runtime_error(std::string(source) + ": this CPU cannot run the " + name +
                             " kernels (" + (want == Isa::avx512 ? "AVX-512F + VL" : "AVX2 + FMA") +
                             "); it runs: " + name_list(runnable_isas()) + " (or auto, the best of them)");
  if (!built(want))
    throw std::runtime_error(std::string(source) + ": the " + name + " kernels are not in this build, " +
                             "which has " + name_list(built_isas()) +
                             " (setup.py's GSRENDER_CPU_ISA_BUILD=all compiles every copy)");
  g_active.store(static_cast<int>(want), std::memory_order_relaxed);
  return want;
}

Isa set_cpu_isa_from_env() {
  const char* env = std::getenv("GSRENDER_CPU_ISA");
  return set_cpu_isa(env && *env ? env : "auto", "GSRENDER_CPU_ISA");
}

}  // namespace cpu
}  // namespace gsrender
