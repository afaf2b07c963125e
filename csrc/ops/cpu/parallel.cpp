// parallel.h's calls into PyTorch's thread pool.
#include "cpu/parallel.h"

#include <ATen/Parallel.h>

namespace gsrender {
namespace cpu {

int num_threads() { return at::get_num_threads(); }

int thread_num() { return at::get_thread_num(); }

void parallel_chunks(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, const void* ctx) {
  at::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { fn(ctx, b, e); });
}

}  // namespace cpu
}  // namespace gsrender
