// Compile check only (no op, no TORCH_LIBRARY): instantiates every wrapper of ptx.cuh and the
// device path of gsrender/mma_fragments.h so CI proves they assemble for sm_80 / sm_90 before the
// MMA rasterizer uses them. Never launched.
#include "gsrender/mma_fragments.h"
#include "ptx.cuh"

namespace gsrender {
namespace {

// One m16n8k16 step the way the rasterizer does it: B staged with cp.async, loaded with ldmatrix,
// A built from the lane's W row via the quad scan; f16 and bf16 MMAs.
__global__ void ptx_check_kernel(const __half* __restrict__ feats, const float* __restrict__ alpha,
                                 float* __restrict__ out) {
  __shared__ alignas(16) __half tile[mma::kK][mma::kN];
  const int lane = threadIdx.x & 31;
  if (lane < mma::kK) ptx::cp_async_cg16(&tile[lane][0], feats + lane * mma::kN);
  ptx::cp_async_commit();
  ptx::cp_async_wait_group<0>();
  __syncwarp();
  uint32_t b[2];
  ptx::ldmatrix_x2_trans(b, &tile[mma::ldmatrix_x2_row(lane)][0]);

  mma::DeviceQuad q;
  float w[2][4];
  for (int h = 0; h < 2; ++h) {
    const float al[4] = {alpha[4 * lane], alpha[4 * lane + 1], alpha[4 * lane + 2],
                         alpha[4 * lane + 3]};
    const int pos1[4] = {1, 2, 3, 4};
    float trans = 1.0f;
    bool done = false;
    int last = 0;
    mma::row_weights(al, pos1, lane & 3, q, trans, done, last, w[h]);
  }
  uint32_t a[4], abf[4];
  mma::pack_a<false>(w, a);
  mma::pack_a<true>(w, abf);
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  ptx::mma_m16n8k16_f16(c, a, b, c);
  ptx::mma_m16n8k16_bf16(c, abf, b, c);
  for (int i = 0; i < 4; ++i) out[32 * i + lane] = c[i];
}

}  // namespace

// Keeps the kernel referenced so it is emitted.
void* ptx_check_kernel_address() { return reinterpret_cast<void*>(&ptx_check_kernel); }

}  // namespace gsrender
