// Named inline-PTX wrappers of the Tensor Core rasterizer (docs/design.md §5, §5.4): warp MMA, ldmatrix and
// cp.async. Only these touch PTX; the lane bookkeeping around them lives in
// gsrender/mma_fragments.h. Everything here needs sm_80+;
// on older targets (or in host passes) the wrappers compile to a trap so a wrong dispatch is loud.
// The host SIMT build (-DGSR_SIMT, tools/simt) runs each wrapper's instruction on its warp
// emulator instead (tools/simt/simt_ptx.h); nvcc never sees that path.
#pragma once
#include <cstdint>
#if defined(GSR_SIMT)
#include "simt_ptx.h"
#endif

namespace gsrender {
namespace ptx {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define GSR_PTX_SM80 1
#else
#define GSR_PTX_SM80 0
#endif

// D = A·B + C for one m16n8k16 tile, f32 accumulators (g = lane>>2, t = lane&3):
//   a[4]: A 16×16 row-major, .f16x2 (or .bf16x2) registers
//         a[0] = (g, 2t..2t+1)  a[1] = (g+8, 2t..2t+1)  a[2] = (g, 2t+8..2t+9)  a[3] = (g+8, 2t+8..)
//         (low half = lower column)
//   b[2]: B 16×8 "col" (K-contiguous per column): b[0] = (k = 2t..2t+1, n = g), b[1] = (k = 2t+8..,
//         n = g) (low half = lower k)
//   c[4], d[4]: f32, d[0..1] = (g, 2t..2t+1), d[2..3] = (g+8, 2t..2t+1)
// d may alias c (accumulate in place). The three MMA wrappers share one body (GSR_MMA_BODY);
// only the instruction differs.
#if GSR_PTX_SM80
#define GSR_MMA_BODY(INSTR)                                                                      \
  asm volatile(INSTR " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"   \
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                  \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),    \
                 "f"(c[1]), "f"(c[2]), "f"(c[3]))
#elif defined(GSR_SIMT)
#define GSR_MMA_BODY(INSTR) \
  ::gsr_simt::ptx::mma<::gsr_simt::ptx::mma_type(INSTR)>(d, a, b, c, INSTR, __FILE__, __LINE__)
#else
#define GSR_MMA_BODY(INSTR) ((void)d, (void)a, (void)b, (void)c, __trap())
#endif

__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4],
                                                 const uint32_t (&b)[2], const float (&c)[4]) {
  GSR_MMA_BODY("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
}

// Same layouts with bfloat16 operands.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4],
                                                  const uint32_t (&b)[2], const float (&c)[4]) {
  GSR_MMA_BODY("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
}

// D = A·B + C for one m16n8k8 tile with tf32 operands (32-bit registers holding tf32 values):
//   a[4]: a[0] = (g, t)  a[1] = (g+8, t)  a[2] = (g, t+4)  a[3] = (g+8, t+4)
//   b[2]: b[0] = (k = t, n = g)  b[1] = (k = t+4, n = g)
//   c[4], d[4]: as m16n8k16.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4],
                                                 const uint32_t (&b)[2], const float (&c)[4]) {
  GSR_MMA_BODY("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
}

#undef GSR_MMA_BODY

// float → tf32 (round to nearest, ties away; the low 13 mantissa bits cleared).
__device__ __forceinline__ uint32_t to_tf32(float x) {
#if GSR_PTX_SM80
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#elif defined(GSR_SIMT)
  return ::gsr_simt::ptx::to_tf32(x);
#else
  (void)x;
  __trap();
  return 0;
#endif
}

// Shared-memory address of a generic pointer to shared memory (for ldmatrix / cp.async).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16: two 8×8 b16 matrices, transposed on load.
// Lane l < 16 passes row_ptr = the 16-byte-aligned address of row l&7 of matrix l>>3 (lanes 16–31:
// any valid shared address, ignored). Lane receives r[m] = { M_m[2t][g], M_m[2t+1][g] } (low,
// high). With M_m = rows 8m..8m+7 of a [Gaussian][channel] half block (8 channels per row), r is
// exactly the m16n8k16 B fragment: r[m] = B(k = 8m + 2t..8m+2t+1, n = g).
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* row_ptr) {
#if GSR_PTX_SM80
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(row_ptr)));
#elif defined(GSR_SIMT)
  ::gsr_simt::ptx::ldmatrix(r, 2, true, row_ptr, "ldmatrix.x2.trans", __FILE__, __LINE__);
#else
  (void)r, (void)row_ptr;
  __trap();
#endif
}

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: four 8×8 b16 matrices. Lane l passes the
// 16-byte-aligned address of row l&7 of matrix l>>3. Without .trans lane receives
// r[m] = { M_m[g][2t], M_m[g][2t+1] }; with .trans r[m] = { M_m[2t][g], M_m[2t+1][g] }.
// With M_0..M_3 = the (rows 0–7, cols 0–7), (8–15, 0–7), (0–7, 8–15), (8–15, 8–15) blocks of a
// row-major 16×16 tile X, the plain load is the m16n8k16 A fragment of X and the .trans load the
// A fragment of Xᵀ (when M_1 and M_2 swap roles: see the callers' address maps).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_ptr) {
#if GSR_PTX_SM80
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_ptr)));
#elif defined(GSR_SIMT)
  ::gsr_simt::ptx::ldmatrix(r, 4, false, row_ptr, "ldmatrix.x4", __FILE__, __LINE__);
#else
  (void)r, (void)row_ptr;
  __trap();
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_ptr) {
#if GSR_PTX_SM80
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_ptr)));
#elif defined(GSR_SIMT)
  ::gsr_simt::ptx::ldmatrix(r, 4, true, row_ptr, "ldmatrix.x4.trans", __FILE__, __LINE__);
#else
  (void)r, (void)row_ptr;
  __trap();
#endif
}

// cp.async.cg.shared.global: asynchronous 16-byte global → shared copy, bypassing L1 (features are
// read once per tile). src_bytes < 16 zero-fills the rest (0: a masked channel tail / padding
// Gaussian without touching global memory). Both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async_cg16(void* smem_dst, const void* gmem_src,
                                              int src_bytes = 16) {
#if GSR_PTX_SM80
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :
               : "r"(smem_addr(smem_dst)), "l"(gmem_src), "r"(src_bytes)
               : "memory");
#elif defined(GSR_SIMT)
  ::gsr_simt::ptx::cp_async16(smem_dst, gmem_src, src_bytes);
#else
  (void)smem_dst, (void)gmem_src, (void)src_bytes;
  __trap();
#endif
}

// Closes the group of cp.async issued so far by this thread.
__device__ __forceinline__ void cp_async_commit() {
#if GSR_PTX_SM80
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#elif defined(GSR_SIMT)
  ::gsr_simt::async_commit();
#endif
}

// Waits until at most N of this thread's committed groups are still in flight (N = 1: double
// buffering, the next batch keeps loading while this one is used). Follow with __syncthreads()
// (or __syncwarp()) before other threads read the data.
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
#if GSR_PTX_SM80
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#elif defined(GSR_SIMT)
  ::gsr_simt::async_wait(N);
#endif
}

}  // namespace ptx
}  // namespace gsrender
