// What the two TEST-ONLY warp emulation files share (docs/design.md §5.4): the emulated tile's Gaussian
// list, and the backward's op (csrc/cpu/mma_bwd_emulation.cpp), registered in
// csrc/cpu/mma_emulation.cpp's library fragment with the forward's emulation ops.
#pragma once
#include <ATen/ATen.h>

#include <tuple>
#include <vector>

#include "raster_tile.h"

namespace gsrender {
namespace emu {

// Gaussians 0..G-1 (means2d [G,2], conics [G,3], opacities [G] float32) as one tile's list in that
// order, gathered as the CPU rasterizer gathers (support boxes); φ = depth_weight(depths) when
// depths ([G]) is given, else 1.
inline std::vector<cpu::TileGaussian<float>> gather_list(const at::Tensor& means2d,
                                                         const at::Tensor& conics,
                                                         const at::Tensor& opacities,
                                                         const float* depths, float sigma_w,
                                                         float beta) {
  const at::Tensor m = means2d.contiguous(), c = conics.contiguous(), op = opacities.contiguous();
  const int64_t G = m.size(0);
  std::vector<int32_t> ids(G);
  for (int64_t i = 0; i < G; ++i) ids[i] = static_cast<int32_t>(i);
  RasterArgs<float> a{};
  a.means2d = m.data_ptr<float>(), a.conics = c.data_ptr<float>();
  a.opacities = op.data_ptr<float>(), a.flatten_ids = ids.data();
  a.sorted = depths == nullptr;
  a.depths = depths, a.sigma_w = sigma_w, a.beta = beta;
  std::vector<cpu::TileGaussian<float>> gs;
  cpu::gather_tile(a, 0, static_cast<int32_t>(G), gs);
  return gs;
}

// means2d [G,2], conics [G,3], opacities [G], colors [G,CH] in list order (sorted: depth order);
// render [H,W,CH], alphas [H,W], aux [H,W] (sorted: T_final; weighted: Σw + w_bg), v_render
// [H,W,CH], v_alphas [H,W] over the whole image; depths [G] selects the weighted mode (φ and
// dφ/dz from sigma_w, beta). precision 0 f32 operands, 1 f16, 2 bf16. The 16×16 tile
// (tile_x, tile_y) is run as the kernel runs it; returns (v_means2d, v_conics, v_opacities,
// v_colors, v_depths) from that tile's pixels.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> emulate_mma_bwd_tile(
    const at::Tensor& means2d, const at::Tensor& conics, const at::Tensor& opacities,
    const at::Tensor& colors, int64_t tile_x, int64_t tile_y, int64_t width, int64_t height,
    const at::Tensor& render, const at::Tensor& alphas, const at::Tensor& aux,
    const at::Tensor& v_render, const at::Tensor& v_alphas, int64_t precision,
    const c10::optional<at::Tensor>& depths, double sigma_w, double beta);

}  // namespace emu
}  // namespace gsrender
