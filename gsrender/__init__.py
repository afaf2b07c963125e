"""gsrender: Gaussian Splatting rendering as matrix multiplication (CPU GEMM / GPU Tensor Cores)."""
from gsrender.render import (DEFAULT_WEIGHT_PARAMS, RenderOutput, packing_efficiency, raster_plan,
                             rasterize)
from gsrender.scene import GaussianModel
from gsrender.validate import set_validation, validation

__all__ = ["DEFAULT_WEIGHT_PARAMS", "GaussianModel", "RenderOutput", "packing_efficiency",
           "raster_plan", "rasterize", "set_validation", "validation"]
__version__ = "0.1.0"
