"""gsrender: Gaussian Splatting rendering as matrix multiplication (CPU GEMM / GPU Tensor Cores)."""
import os

# OpenMP threads that wait sleep instead of spinning, unless the caller chose otherwise. libgomp
# reads this once, when torch loads it, so it applies where gsrender is imported first (the
# `gsrender` command, benchmarks/train.py). Spinning waiters burned 72 % of a 2-thread training
# step's CPU time on a shared 2-core machine and made the step 3.3x slower in wall time
# (docs/cpu.md, "OpenMP wait policy"); OMP_WAIT_POLICY=ACTIVE restores it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# torch's CPU tensors of 2 MB and more on transparent huge pages (c10 reads THP_MEM_ALLOC_ENABLE
# once, at torch's first allocation: again only where gsrender is imported first). A training
# step's large buffers (the [C, H, W, 4 + D] render and its gradient, the feature gradients) are
# mapped fresh every step, above glibc's mmap threshold, and 4 KB pages cost a fault each: with
# huge pages a D = 64 step took 8 % less CPU time (docs/cpu.md, "Memory");
# THP_MEM_ALLOC_ENABLE=0 restores 4 KB pages.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
# From the second CPU render on (a loop), gsrender's cache of freed blocks is PyTorch's CPU
# allocator for every tensor of 128 KB or more (csrc/cpu/host_blocks.h, note_cpu_render): a
# training step's gradient copies and sums otherwise fault their pages in again every step
# (550-1100 faults, 20-200 ms of system time per D = 64 step on a 2-core virtual machine;
# docs/cpu.md, "Memory"). GSRENDER_HOST_CACHE=0 keeps PyTorch's allocator.

from gsrender.render import DEFAULT_WEIGHT_PARAMS, RenderOutput, packing_efficiency, raster_plan, rasterize
from gsrender.scene import GaussianModel
from gsrender.validate import set_validation, validation

__all__ = ["DEFAULT_WEIGHT_PARAMS", "GaussianModel", "RenderOutput", "packing_efficiency",
           "raster_plan", "rasterize", "set_validation", "validation"]
__version__ = "0.1.0"
