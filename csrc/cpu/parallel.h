// PyTorch's CPU thread pool (at::parallel_for, at::get_num_threads), which the kernels share with
// the rest of the process, behind a torch-free interface: parallel.cpp holds the calls, so the
// kernels' translation units include no torch header (a third of a small unit's compile time and
// ~0.6 GB of its compiler memory go to those headers alone).
#pragma once
#include <cstdint>

namespace gsrender {
namespace cpu {

// at::get_num_threads(), at::get_thread_num()
int num_threads();
int thread_num();

// at::parallel_for(begin, end, grain, ...): fn(ctx, b, e) on chunks [b, e) of [begin, end).
using ChunkFn = void (*)(const void* ctx, int64_t b, int64_t e);
void parallel_chunks(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, const void* ctx);

// at::parallel_for with any callable f(b, e).
template <class F>
inline void parallel_range(int64_t begin, int64_t end, int64_t grain, const F& f) {
  parallel_chunks(
      begin, end, grain,
      [](const void* ctx, int64_t b, int64_t e) { (*static_cast<const F*>(ctx))(b, e); }, &f);
}

}  // namespace cpu
}  // namespace gsrender
