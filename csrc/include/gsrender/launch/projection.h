// Launchers of project_fwd / project_bwd (csrc/cuda/projection_kernel.cu); torch-free, see
// gsrender/launch/common.h. T = float or double.
#pragma once
#include "gsrender/launch/common.h"

namespace gsrender {
namespace launch {

template <typename T>
struct ProjectFwdArgs {
  const T* means;      // [N, 3]
  const T* quats;      // [N, 4] wxyz
  const T* scales;     // [N, 3]
  const T* opacities;  // [N]
  const T* viewmats;   // [C, 4, 4]
  const T* Ks;         // [C, 3, 3]
  int64_t C, N;
  int width, height;
  T eps2d, near_plane, far_plane, radius_clip;
  bool antialiased;
  int32_t* radii;   // [C, N, 2] out
  T* means2d;       // [C, N, 2] out
  T* depths;        // [C, N] out
  T* conics;        // [C, N, 3] out
  T* opacities2d;   // [C, N] out
  int camera_model = 0;  // CameraModel (gsrender/camera.h)
};

template <typename T>
cudaError_t launch_project_fwd(const ProjectFwdArgs<T>& a, cudaStream_t stream);

template <typename T>
struct ProjectBwdArgs {
  const T *means, *quats, *scales, *opacities, *viewmats, *Ks;  // as ProjectFwdArgs
  int64_t C, N;
  int width, height;
  T eps2d;
  bool antialiased;
  const int32_t* radii;    // [C, N, 2] (the forward's)
  const T* v_means2d;      // [C, N, 2]
  const T* v_depths;       // [C, N]
  const T* v_conics;       // [C, N, 3]
  const T* v_opacities2d;  // [C, N]
  T* v_means;              // [N, 3] out
  T* v_quats;              // [N, 4] out
  T* v_scales;             // [N, 3] out
  T* v_opacities;          // [N] out
  T* v_viewmats;           // [C, 4, 4] out: rows 0..2 written, row 3 zeroed by the caller
  int camera_model = 0;    // CameraModel (gsrender/camera.h)
};

// Scratch: the per-block v_viewmats shares of the deterministic reduction.
template <typename T>
size_t project_bwd_workspace_bytes(const ProjectBwdArgs<T>& a);
template <typename T>
cudaError_t launch_project_bwd(const ProjectBwdArgs<T>& a, Workspace ws, cudaStream_t stream);

}  // namespace launch
}  // namespace gsrender
