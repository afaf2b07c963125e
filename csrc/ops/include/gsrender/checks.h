// Host-side argument checks shared by every op entry point (CPU and CUDA). Each names the
// argument, and raises ValueError / TypeError in Python (TORCH_CHECK_VALUE / _TYPE).
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace gsrender {

// Checks rank and the sizes that are fixed (-1 = any); throws on mismatch. `shape`, when given,
// is the expected shape as the user reads it ("[N, 3] (N from means)"); otherwise it is spelled
// from the sizes ("[*, 3]").
inline void check_shape(const at::Tensor& t, const char* name, std::vector<int64_t> sizes,
                        const char* shape = nullptr) {
  auto want = [&] {
    if (shape) return std::string(shape);
    std::string s = "[";
    for (size_t i = 0; i < sizes.size(); ++i)
      s += (i ? ", " : "") + (sizes[i] < 0 ? std::string("*") : std::to_string(sizes[i]));
    return s + "]";
  };
  TORCH_CHECK_VALUE(t.dim() == static_cast<int64_t>(sizes.size()), name, " must have shape ",
                    want(), ", got ", t.sizes());
  for (size_t i = 0; i < sizes.size(); ++i)
    TORCH_CHECK_VALUE(sizes[i] < 0 || t.size(i) == sizes[i], name, " must have shape ", want(),
                      ", got ", t.sizes());
}

// Images up to 16384 px a side (as the Python API); larger requests are refused before any
// allocation rather than failing in the allocator or overflowing int32 pixel indices.
constexpr int64_t kMaxImageSide = 16384;
inline void check_image_size(int64_t width, int64_t height) {
  TORCH_CHECK_VALUE(width > 0 && height > 0 && width <= kMaxImageSide && height <= kMaxImageSide,
                    "width and height must be in [1, ", kMaxImageSide, "], got ", width, "x",
                    height);
}

inline void check_float(const at::Tensor& t, const char* name, at::ScalarType dtype) {
  TORCH_CHECK_TYPE(t.scalar_type() == dtype, name, " must have dtype ", dtype, ", got ",
                   t.scalar_type());
}

inline void check_int32(const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(t.scalar_type() == at::kInt, name, " must have dtype int32, got ",
                   t.scalar_type());
}

inline void check_device(const at::Tensor& t, const char* name, const at::Device& device) {
  TORCH_CHECK_VALUE(t.device() == device, name, " must be on ", device, ", got ", t.device());
}

inline void check_floating(const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, name,
                   " must be float32 or float64, got ", t.scalar_type());
}

// Same dtype and device as `ref` (named ref_name).
inline void check_like(const at::Tensor& t, const char* name, const at::Tensor& ref,
                       const char* ref_name) {
  TORCH_CHECK_TYPE(t.scalar_type() == ref.scalar_type(), name, " must have the dtype of ",
                   ref_name, " (", ref.scalar_type(), "), got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.device() == ref.device(), name, " must be on the device of ", ref_name,
                    " (", ref.device(), "), got ", t.device());
}

}  // namespace gsrender
