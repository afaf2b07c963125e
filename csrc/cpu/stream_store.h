// Streaming (non-temporal) stores for outputs too large to stay in the cores' caches until their
// consumer reads them: an ordinary store first reads its line into the cache (write-allocate), a
// streaming one does not, and the write-combining buffers join consecutive 16-byte stores into
// whole lines. SSE2's _mm_stream_si128, which every ISA copy has. A thread's streamed lines are
// ordered before its later stores only after _mm_sfence: each parallel worker ends with one.
#pragma once
#include <emmintrin.h>

#include <cstdint>

namespace gsrender {
namespace cpu {

// Outputs of at least this many bytes are streamed. The benchmark scene, two threads, alternated
// A/Bs (docs/cpu.md, "Feature GEMM"): the D = 256 render at 512² (272 MB)
// 3–8 ms faster of ~130 in each of six rounds, the D = 64 render at 512² (71 MB) and at
// 1920 × 1080 (564 MB) unchanged, so the bound is not set lower; the D = 256 channels of
// sh_channels_fwd (104 MB) 2.3 ms faster of ~10.3 in every round.
constexpr int64_t kStreamMin = int64_t(64) << 20;

// n values from src (any alignment) to dst (16-byte aligned), n·sizeof(T) a multiple of 16.
template <typename T>
inline void stream_copy(T* dst, const T* src, int64_t n) {
  auto* d = reinterpret_cast<__m128i*>(dst);
  const auto* q = reinterpret_cast<const __m128i*>(src);
  for (int64_t i = 0, m = n * int64_t(sizeof(T)) / 16; i < m; ++i)
    _mm_stream_si128(d + i, _mm_loadu_si128(q + i));
}

}  // namespace cpu
}  // namespace gsrender
