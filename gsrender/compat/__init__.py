"""Drop-in front doors: existing gsplat / 3DGS (diff-gaussian-rasterization) code runs on gsrender
with only its import changed. See gsplat.py and inria.py for the documented differences."""
from gsrender.compat import gsplat, inria

__all__ = ["gsplat", "inria"]
