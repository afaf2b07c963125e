// The block that holds the frame's RowGaussians (row_tile.h), from the CPU outputs' allocator
// (torch side: row_tile.h includes no torch header).
#pragma once
#include <ATen/ATen.h>

#include "gsrender/host_alloc.h"
#include "cpu/row_tile.h"

namespace gsrender {
namespace cpu {

// The frame's RowGaussians, uninitialised until prepare_gaussians writes them, in an empty_host
// block: 64-byte aligned (PyTorch's allocator; 2 MB aligned from 2 MB on), so at float each
// Gaussian is one cache line of the tile set-up's random reads, not two (an unaligned one
// straddles a line boundary); and from 2 MB (32k Gaussians) on huge pages, so those reads miss
// the TLB far less (1M Gaussians: 64 MB, 16 k pages of 4 KB), its first touch faults 32 pages,
// not 16 k, and the next frame's array reuses the block.
static_assert(sizeof(RowGaussian<float>) == 64, "a float RowGaussian is one cache line");
template <typename T>
struct GaussianArray {
  at::Tensor block;  // [n · sizeof(RowGaussian)] bytes
  explicit GaussianArray(int64_t n = 0)
      : block(empty_host({n * int64_t(sizeof(RowGaussian<T>))}, at::TensorOptions(at::kByte))) {}
  RowGaussian<T>* data() const { return reinterpret_cast<RowGaussian<T>*>(block.data_ptr()); }
};

}  // namespace cpu
}  // namespace gsrender
