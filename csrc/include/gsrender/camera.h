// One camera as the projection sees it (the world-to-camera pose, the intrinsics, the image size)
// and the lens models (gsplat's camera_model values). Shared by the CPU and CUDA backends.
#pragma once

#include "gsrender/common.h"
#include "gsrender/math.h"

namespace gsrender {

// The op's camera_model argument; the values are the schema's (gsrender.contract.CAMERA_MODELS
// reads kCameraModelNames through _C.camera_models()). The projection templates take it as a
// compile-time parameter.
enum CameraModel : int {
  kPinhole = 0,  // u = fx·x/z + cx
  kOrtho = 1,    // u = fx·x + cx (depth does not scale the image)
  kFisheye = 2,  // equidistant: u = fx·θ·x/r + cx, r = |(x, y)|, θ = atan2(r, z)
};
constexpr int kNumCameraModels = 3;
inline constexpr const char* kCameraModelNames[kNumCameraModels] = {"pinhole", "ortho", "fisheye"};

template <int Model>
struct CameraModelTag {
  static constexpr int value = Model;
};

// f(CameraModelTag<Model>{}) for the runtime camera_model (a checked CameraModel value): one
// switch per call, so loops and kernels inside f are compiled per lens.
template <typename F>
GSR_HOST_DEVICE decltype(auto) with_camera_model(int camera_model, F&& f) {
  switch (camera_model) {
    case kOrtho:
      return f(CameraModelTag<kOrtho>{});
    case kFisheye:
      return f(CameraModelTag<kFisheye>{});
    default:
      return f(CameraModelTag<kPinhole>{});
  }
}

template <typename T>
struct Camera {
  Mat3<T> R;  // world-to-camera rotation, viewmat[:3,:3]
  Vec3<T> t;  // viewmat[:3,3]
  T fx, fy, cx, cy;
  T width, height;
  // ewa_jacobian's clamp of x/z and y/z (see there), per camera rather than per Gaussian
  T lim_x_pos, lim_x_neg, lim_y_pos, lim_y_neg;
};

// viewmat: 16 row-major values, K: 9 row-major values (skew is ignored, as in gsplat).
template <typename T>
GSR_HOST_DEVICE Camera<T> load_camera(const T* viewmat, const T* K, int width, int height) {
  Camera<T> cam;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) cam.R.m[i][j] = viewmat[i * 4 + j];
  cam.t = {viewmat[3], viewmat[7], viewmat[11]};
  cam.fx = K[0];
  cam.fy = K[4];
  cam.cx = K[2];
  cam.cy = K[5];
  cam.width = T(width);
  cam.height = T(height);
  const T tan_fovx = T(0.5) * cam.width / cam.fx;
  const T tan_fovy = T(0.5) * cam.height / cam.fy;
  cam.lim_x_pos = (cam.width - cam.cx) / cam.fx + T(0.3) * tan_fovx;
  cam.lim_x_neg = cam.cx / cam.fx + T(0.3) * tan_fovx;
  cam.lim_y_pos = (cam.height - cam.cy) / cam.fy + T(0.3) * tan_fovy;
  cam.lim_y_neg = cam.cy / cam.fy + T(0.3) * tan_fovy;
  return cam;
}

}  // namespace gsrender
