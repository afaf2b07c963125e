// The ssim_fwd / ssim_bwd ops on the CPU: check their arguments, allocate the outputs and run
// ssim_kernel.cpp (the fused blurs and the SSIM formula: what they compute is written there).
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <tuple>

#include "gsrender/checks.h"
#include "cpu/ssim_kernel.h"

namespace gsrender {
namespace {

using at::Tensor;
using cpu::kSsimMoments;

void check_ssim_inputs(const Tensor& x, const Tensor& y, const Tensor& window) {
  check_shape(x, "x", {-1, -1, -1, -1}, "[B, H, W, CH]");
  check_floating(x, "x");
  check_shape(y, "y", x.sizes().vec(), "[B, H, W, CH] (as x)");
  check_like(y, "y", x, "x");
  check_shape(window, "window", {-1}, "[K]");
  check_like(window, "window", x, "x");
  TORCH_CHECK_VALUE(window.size(0) % 2 == 1, "window must have an odd length K, got ",
                    window.size(0));
}

// x, y [B, H, W, CH], window [K] (K odd) -> ssim [B, H, W, CH], moments [5, B·CH, H, W]
std::tuple<Tensor, Tensor> ssim_fwd_cpu(const Tensor& x, const Tensor& y, const Tensor& window,
                                        double c1, double c2) {
  check_ssim_inputs(x, y, window);
  const int64_t H = x.size(1), W = x.size(2), CH = x.size(3), P = x.size(0) * CH;
  const int r = static_cast<int>(window.size(0) / 2);
  const Tensor x_c = x.contiguous(), y_c = y.contiguous(), g_c = window.contiguous();
  Tensor ssim = at::empty(x.sizes(), x.options());
  Tensor moments = at::empty({kSsimMoments, P, H, W}, x.options());
  if (ssim.numel() == 0) return {ssim, moments};
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ssim_fwd_cpu", [&] {
    using T = scalar_t;
    cpu::ssim_fwd_images<T>(x_c.data_ptr<T>(), y_c.data_ptr<T>(), g_c.data_ptr<T>(), r, c1, c2,
                            x.size(0), H, W, CH, ssim.data_ptr<T>(), moments.data_ptr<T>());
  });
  return {ssim, moments};
}

// -> v_x [B, H, W, CH], v_y [B, H, W, CH] (or [0, H, W, CH] when y_grad is false: the target
// of a loss)
std::tuple<Tensor, Tensor> ssim_bwd_cpu(const Tensor& x, const Tensor& y, const Tensor& window,
                                        double c1, double c2, const Tensor& moments,
                                        const Tensor& v_ssim, bool y_grad) {
  check_ssim_inputs(x, y, window);
  const int64_t H = x.size(1), W = x.size(2), CH = x.size(3), P = x.size(0) * CH;
  check_shape(moments, "moments", {kSsimMoments, P, H, W}, "[5, B*CH, H, W] (ssim_fwd's)");
  check_like(moments, "moments", x, "x");
  check_shape(v_ssim, "v_ssim", x.sizes().vec(), "[B, H, W, CH] (as x)");
  check_like(v_ssim, "v_ssim", x, "x");
  const int r = static_cast<int>(window.size(0) / 2);
  const Tensor x_c = x.contiguous(), y_c = y.contiguous(), m_c = moments.contiguous(),
               v_c = v_ssim.contiguous(), g_rev = window.flip(0).contiguous();
  Tensor v_x = at::empty(x.sizes(), x.options());
  Tensor v_y = at::empty({y_grad ? x.size(0) : 0, H, W, CH}, x.options());
  if (v_x.numel() == 0) return {v_x, v_y};
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ssim_bwd_cpu", [&] {
    using T = scalar_t;
    cpu::ssim_bwd_images<T>(x_c.data_ptr<T>(), y_c.data_ptr<T>(), g_rev.data_ptr<T>(), r, c1, c2,
                            x.size(0), H, W, CH, m_c.data_ptr<T>(), v_c.data_ptr<T>(),
                            v_x.data_ptr<T>(), y_grad ? v_y.data_ptr<T>() : nullptr);
  });
  return {v_x, v_y};
}

}  // namespace
}  // namespace gsrender

TORCH_LIBRARY_IMPL(gsrender, CPU, m) {
  m.impl("ssim_fwd", &gsrender::ssim_fwd_cpu);
  m.impl("ssim_bwd", &gsrender::ssim_bwd_cpu);
}
