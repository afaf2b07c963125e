// The Tensor Core backward's operands (docs/design.md §5.4), prepared with ATen for its CPU warp emulator
// (the CUDA launcher computes the same values on the device, csrc/cuda/kernels/mma_operands.cuh):
//   G = v_render (weighted: divided by Σw + w_bg), G·OUT per pixel, per-channel s_G = max |G|,
//   Ĝ = G / s_G and F̃ = F·s_G / s_F (s_F = max |F·s_G|) rounded to f16 / bf16, channels padded to
//   a multiple of 8 (16-byte rows for cp.async) with zeros.
// No host sync: the scales stay on the device.
#pragma once
#include <ATen/ATen.h>

namespace gsrender {
namespace mma {

struct BwdOperands {
  at::Tensor g;        // [P, CHp] Ĝ in the operand type
  at::Tensor f;        // [rows, CHp] F̃ in the operand type
  at::Tensor g_scale;  // [CH] float32 s_G
  at::Tensor f_scale;  // [1] float32 s_F
  at::Tensor gout;     // [P] float32 G·OUT
  int64_t CHp;
};

// x [rows, CH] → ([rows, CHp] in the operand type, rows padded with zeros to 16 bytes).
inline at::Tensor operand_rows(const at::Tensor& x, int64_t CHp, at::ScalarType dt) {
  at::Tensor out = at::zeros({x.size(0), CHp}, x.options().dtype(dt));
  out.narrow(1, 0, x.size(1)).copy_(x);
  return out;
}

// v_render, render [P, CH]; aux [P] (weighted: Σw + w_bg); colors [rows, CH]; dt kHalf / kBFloat16.
inline BwdOperands bwd_operands(const at::Tensor& v_render, const at::Tensor& render,
                                const at::Tensor& aux, const at::Tensor& colors, bool sorted,
                                at::ScalarType dt) {
  const int64_t P = v_render.size(0), CH = v_render.size(1), CHp = (CH + 7) / 8 * 8;
  at::Tensor g = v_render;
  if (!sorted) g = g / aux.reshape({P, 1});
  const at::Tensor gout = (g * render).sum(1).contiguous();
  at::Tensor g_scale = g.abs().amax(0);
  g_scale = at::where(g_scale > 0, g_scale, at::ones_like(g_scale)).contiguous();  // [CH]
  const at::Tensor f = colors * g_scale;
  at::Tensor f_scale = f.numel() > 0 ? f.abs().amax().reshape({1}) : at::ones({1}, f.options());
  f_scale = at::where(f_scale > 0, f_scale, at::ones_like(f_scale)).contiguous();
  return {operand_rows(g / g_scale, CHp, dt), operand_rows(f / f_scale, CHp, dt), g_scale,
          f_scale, gout, CHp};
}

}  // namespace mma
}  // namespace gsrender
