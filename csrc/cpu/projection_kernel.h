// The projection ops' CPU kernels (projection_kernel.cpp), torch-free: projection.cpp, the op,
// checks the arguments and allocates what these write. Every array contiguous; T = float or
// double.
#pragma once
#include <cstdint>

namespace gsrender {
namespace cpu {

// project_fwd: radii [C, N, 2], means2d [C, N, 2], depths [C, N], conics [C, N, 3] and
// opacities2d [C, N] (every element written; culled: zeros) of means [N, 3], quats [N, 4]
// (wxyz), scales [N, 3], opacities [N] seen by viewmats [C, 4, 4] and Ks [C, 3, 3].
template <typename T>
struct ProjectFwdArgs {
  const T *means, *quats, *scales, *opacities, *viewmats, *Ks;
  int64_t C, N;
  int width, height, camera_model;
  double eps2d, near_plane, far_plane, radius_clip;
  bool antialiased;
  int32_t* radii;
  T *means2d, *depths, *conics, *opacities2d;
};
template <typename T>
void project_fwd(const ProjectFwdArgs<T>& a);

// project_bwd: v_means [N, 3], v_quats [N, 4], v_scales [N, 3], v_opacities [N] (zeros in, the
// gradients added) and rows 0..2 of v_viewmats [C, 4, 4] (written) from the forward's inputs,
// its radii [C, N, 2] (culled pairs get no gradient) and the outputs' gradients.
template <typename T>
struct ProjectBwdArgs {
  const T *means, *quats, *scales, *opacities, *viewmats, *Ks;
  int64_t C, N;
  int width, height, camera_model;
  double eps2d;
  bool antialiased;
  const int32_t* radii;
  const T *v_means2d, *v_depths, *v_conics, *v_opacities2d;
  T *v_means, *v_quats, *v_scales, *v_opacities, *v_viewmats;
};
template <typename T>
void project_bwd(const ProjectBwdArgs<T>& a);

}  // namespace cpu
}  // namespace gsrender
