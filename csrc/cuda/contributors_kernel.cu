// CUDA contributors (VODA): one thread per requested pixel, running the walk the CPU runs
// (gsrender/contributors.h) on the same tile lists, reading the list straight from global memory
// (a pixel's walk is short and irregular: it goes past the renderer's stop until the open depth
// cluster closes, so a tile-wide shared staging would serialise the block on its longest walk).
#include "gsrender/contributors_walk.h"
#include "gsrender/launch/contributors.h"

namespace gsrender {
namespace gpu {
namespace {

constexpr int kThreads = 128;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    contributors_kernel(const RasterArgs<T> a, const int32_t* __restrict__ pix, int64_t P,
                        int64_t K, T tau_rel, T tau_abs, const ContribOutputs<T> o) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.C * P) return;
  const int64_t cam = i / P, q = i % P;
  const int x = pix ? pix[2 * i] : static_cast<int>(q % a.width);
  const int y = pix ? pix[2 * i + 1] : static_cast<int>(q / a.width);
  // padding, or (unchecked without validation) a pixel outside the image: an empty list
  if (x < 0 || y < 0 || x >= a.width || y >= a.height)
    close_list(o, i, K, 0, 0);
  else
    pixel_contributors<T>(a, cam, x, y, K, tau_rel, tau_abs, i, o);
}

}  // namespace
}  // namespace gpu

namespace launch {

template <typename T>
cudaError_t launch_contributors(const ContributorsArgs<T>& a, cudaStream_t stream) {
  const int64_t n = a.in.C * a.P;
  if (n == 0) return cudaSuccess;
  GSR_LAUNCH(static_cast<unsigned>((n + gpu::kThreads - 1) / gpu::kThreads),
                                gpu::kThreads, 0, stream, gpu::contributors_kernel<T>)(a.in, a.pixels, a.P, a.K, a.tau_rel,
                                                            a.tau_abs, a.out);
  return cudaGetLastError();
}

template cudaError_t launch_contributors<float>(const ContributorsArgs<float>&, cudaStream_t);
template cudaError_t launch_contributors<double>(const ContributorsArgs<double>&, cudaStream_t);

}  // namespace launch
}  // namespace gsrender
