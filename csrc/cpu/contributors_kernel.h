// The contributors op's CPU kernel (contributors_kernel.cpp), torch-free: contributors.cpp, the
// op, checks the arguments and allocates what this writes.
#pragma once
#include <cstdint>

#include "gsrender/contributors_walk.h"
#include "gsrender/raster_args.h"

namespace gsrender {
namespace cpu {

// Every camera's P pixels' lists into o: pixels [C, P, 2] (x, y; x < 0 pads: an empty list), or
// nullptr for the whole image (P = height · width, row-major). T = float or double.
template <typename T>
void contributors_pixels(const RasterArgs<T>& a, const int32_t* pixels, int64_t P, int64_t K_max,
                         double tau_rel, double tau_abs, const ContribOutputs<T>& o);

}  // namespace cpu
}  // namespace gsrender
