// Host tensors of 128 KB or more from blocks that, once freed, are kept for the next allocation
// of their size (host_alloc.cpp: BlockCache), backed by transparent huge pages (2 MB) from 2 MB on:
// the CPU ops' large outputs and gradients (the raster's [C, H, W, CH] image, the [C, N, 4 + D]
// channels, projection's and binning's per-Gaussian arrays, the backwards' per-Gaussian
// gradients) and, from a process's second CPU render, every PyTorch CPU tensor. A fresh
// allocation of that size is an mmap, so every first touch page-faults and every free is an
// munmap: on this project's 2-core machine, 512² × 260 float32 channels (272 MB) took 120 ms to
// fill and 40 ms to free with 4 KB pages, 37 ms and 2 ms with huge pages, and a kept block faults
// nothing. Where the system has THP off ("never") blocks get ordinary pages: the same tensor
// either way.
#pragma once

#include <ATen/core/Tensor.h>

namespace gsrender {

// at::empty(sizes, opts) for a CPU tensor (opts: its dtype; CPU device), its storage a cached
// block when it holds at least 128 KB (page aligned; 2 MB aligned and advised for huge pages from
// 2 MB on), PyTorch's allocator below. (PyTorch's CPU allocator too from the second render on.)
at::Tensor empty_host(at::IntArrayRef sizes, const at::TensorOptions& opts);

// at::empty on CUDA, empty_host on the CPU (for outputs shared by both backends).
at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& opts);

// at::zeros through empty_output: a gradient buffer the backward accumulates into, zeroed in
// pages a cached block has already faulted in.
at::Tensor zeros_output(at::IntArrayRef sizes, const at::TensorOptions& opts);

}  // namespace gsrender
