// CPU kernels of sh_fwd / sh_bwd: the per-(camera, Gaussian) math lives in gsrender/sh.h.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <tuple>

#include "gsrender/project_sh_checks.h"
#include "gsrender/sh.h"
#include "isa.h"

namespace gsrender {
namespace {

using at::Tensor;

Tensor sh_fwd_cpu(int64_t degree, const Tensor& dirs, const Tensor& coeffs) {
  check_sh_inputs(degree, dirs, coeffs);
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  const Tensor dirs_c = dirs.contiguous(), coeffs_c = coeffs.contiguous();
  Tensor colors = at::empty({C, N, 3}, dirs.options());  // [C, N, 3]
  AT_DISPATCH_FLOATING_TYPES(dirs.scalar_type(), "sh_fwd_cpu", [&] {
    using T = scalar_t;
    const T* dp = dirs_c.data_ptr<T>();
    const T* cp = coeffs_c.data_ptr<T>();
    T* out = colors.data_ptr<T>();
    const int deg = static_cast<int>(degree);
    cpu::parallel_for(0, C * N, 2048, [&](int64_t begin, int64_t end) {
      for (int64_t idx = begin; idx < end; ++idx) {
        const int64_t n = idx % N;
        sh_eval(deg, load_vec3(dp + 3 * idx), cp + n * K * 3, out + 3 * idx);
      }
    });
  });
  return colors;
}

std::tuple<Tensor, Tensor> sh_bwd_cpu(int64_t degree, const Tensor& dirs, const Tensor& coeffs,
                                      const Tensor& v_colors) {
  check_sh_inputs(degree, dirs, coeffs);
  check_sh_grads(dirs, v_colors);
  const int64_t C = dirs.size(0), N = dirs.size(1), K = coeffs.size(1);
  const Tensor dirs_c = dirs.contiguous(), coeffs_c = coeffs.contiguous(),
               v_colors_c = v_colors.contiguous();
  Tensor v_dirs = at::empty({C, N, 3}, dirs.options());     // [C, N, 3]
  Tensor v_coeffs = at::zeros({N, K, 3}, dirs.options());  // [N, K, 3], 0 for k >= (deg+1)^2
  AT_DISPATCH_FLOATING_TYPES(dirs.scalar_type(), "sh_bwd_cpu", [&] {
    using T = scalar_t;
    const T* dp = dirs_c.data_ptr<T>();
    const T* cp = coeffs_c.data_ptr<T>();
    const T* gp = v_colors_c.data_ptr<T>();
    T* vd = v_dirs.data_ptr<T>();
    T* vc = v_coeffs.data_ptr<T>();
    const int deg = static_cast<int>(degree);
    // Parallel over Gaussians so each v_coeffs row is owned by one thread (summed over cameras
    // in camera order: deterministic).
    cpu::parallel_for(0, N, 1024, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        for (int64_t c = 0; c < C; ++c) {
          const int64_t idx = c * N + n;
          store_vec3(vd + 3 * idx, sh_eval_bwd(deg, load_vec3(dp + 3 * idx), cp + n * K * 3,
                                               gp + 3 * idx, vc + n * K * 3));
        }
      }
    });
  });
  return {v_dirs, v_coeffs};
}

}  // namespace
}  // namespace gsrender

TORCH_LIBRARY_IMPL(gsrender, CPU, m) {
  m.impl("sh_fwd", &gsrender::sh_fwd_cpu);
  m.impl("sh_bwd", &gsrender::sh_bwd_cpu);
}
