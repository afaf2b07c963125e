// The CUDA value-check switch (gsrender/validation.h).
#include "gsrender/validation.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace gsrender {
namespace {
std::atomic<bool> g_validate{false};
thread_local int t_call = -1;
}  // namespace

bool validation_enabled() {
  return t_call >= 0 ? t_call == 1 : g_validate.load(std::memory_order_relaxed);
}

int call_validation() { return t_call; }

int set_call_validation(int v) {
  if (v < -1 || v > 1) throw std::invalid_argument("call validation must be -1, 0 or 1");
  const int prev = t_call;
  t_call = v;
  return prev;
}

void set_validation(bool on) { g_validate.store(on, std::memory_order_relaxed); }

void set_validation_from_env() {
  const char* v = std::getenv("GSRENDER_VALIDATE");
  if (v == nullptr || *v == '\0') return;
  const std::string s(v);
  if (s != "0" && s != "1")
    throw std::invalid_argument("GSRENDER_VALIDATE must be 0 or 1, got '" + s + "'");
  set_validation(s == "1");
}

}  // namespace gsrender
