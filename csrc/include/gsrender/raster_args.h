// The raw-pointer arguments of the rasterize kernels, shared by the CPU tiles, the CUDA kernels
// and the torch-free CUDA launch layer (gsrender/launch/): no ATen here, so kernel translation
// units and tools/kernel_driver compile without torch headers. The ATen-side checks that fill
// these structs are in gsrender/raster_interface.h.
#pragma once
#include <cstdint>

#include "gsrender/common.h"

namespace gsrender {

// Raw pointers and sizes of one rasterize call, shared by the CPU tiles and the CUDA kernels
// (passed to kernels by value).
template <typename T>
struct RasterArgs {
  const T* means2d;             // [C, N, 2]
  const T* conics;              // [C, N, 3]
  const T* opacities;           // [C, N]
  const T* colors;              // [C, N, CH]
  const T* depths;              // [C, N]
  const T* backgrounds;         // [C, CH] or nullptr
  const int32_t* tile_offsets;  // [C, TH, TW]
  const int32_t* flatten_ids;   // [M]
  int64_t C, N, CH, M;
  int width, height, tile_size, TW, TH;
  bool sorted;            // mode 0; weighted (mode 1) otherwise
  T sigma_w, beta, w_bg;  // weighted mode's φ and background weight

  // [start, end) of tile t's run in flatten_ids (t indexes [C, TH, TW])
  GSR_HOST_DEVICE int32_t tile_start(int64_t t) const { return tile_offsets[t]; }
  GSR_HOST_DEVICE int32_t tile_end(int64_t t) const {
    return t + 1 < C * TH * TW ? tile_offsets[t + 1] : static_cast<int32_t>(M);
  }
};

// rasterize_fwd's outputs as raw pointers for both backends' kernels.
template <typename T>
struct FwdOut {
  T* render;          // [C, H, W, CH]
  T* alphas;          // [C, H, W]
  int32_t* last_ids;  // [C, H, W]
  T* aux;             // [C, H, W]: sorted T_final; weighted Σw + w_bg
  int64_t* stats;     // [C, 3]: listed, evaluated, useful pairs
};

// The forward's saved outputs and the incoming / outgoing gradients of rasterize_bwd, as raw
// pointers for both backends.
template <typename T>
struct RasterBwdIO {
  const T* render;          // [C, H, W, CH]
  const T* alphas;          // [C, H, W]
  const int32_t* last_ids;  // [C, H, W]
  const T* aux;             // [C, H, W]
  const T* v_render;        // [C, H, W, CH]
  const T* v_alphas;        // [C, H, W]
  T *v_means2d, *v_conics, *v_opacities, *v_colors, *v_depths, *v_backgrounds;
};

}  // namespace gsrender
