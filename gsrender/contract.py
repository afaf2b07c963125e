"""The rendering contract's thresholds (docs/design.md §3), read from their one definition in the
kernels (csrc/include/gsrender/common.h) so the float64 reference, packing, radii and the tests
can never disagree with what the kernels do; and the op's options and limits, each defined once."""
from __future__ import annotations

from gsrender import _C

_CONTRACT = _C.contract()
ALPHA_MIN: float = _CONTRACT["alpha_min"]  # a (pixel, Gaussian) pair contributes iff α ≥ 1/255
ALPHA_MIN_INV: float = _CONTRACT["alpha_min_inv"]  # 255: support level ln(255·o), one exact multiply
ALPHA_MAX: float = _CONTRACT["alpha_max"]  # α = min(0.99, o·exp(−σ))
TRANSMITTANCE_MIN: float = _CONTRACT["transmittance_min"]  # stop where T·(1−α) < 1e-4 (3DGS)

# The op's options, each defined here once (the ops, the renderer, the float64 reference and the
# compat layers read them); where the kernels own one, it is read from them.
MODES = tuple(_C.raster_modes())  # ("sorted", "weighted"), by the op's mode value (raster_plan.h)
# project's lens models, by the op's camera_model value: ("pinhole", "ortho", "fisheye")
# (CameraModel in gsrender/camera.h; gsplat's camera_model values it implements)
CAMERA_MODELS = tuple(_C.camera_models())
# Weighted (sort-free) mode: OUT = (Σ αᵢφ(zᵢ)fᵢ + w_bg·bg) / (Σ αᵢφ(zᵢ) + w_bg), φ(z) = exp(−σ·z^β).
# σ = 0.05 with β = 1 gives a gentle preference for nearer Gaussians over the depth range of
# typical scenes (φ falls from ~0.95 at z = 1 to ~0.37 at z = 20); w_bg = 1e-3 lets the
# background show only where the Gaussians' total weight is small compared with it.
DEFAULT_WEIGHT_PARAMS = (0.05, 1.0, 1e-3)  # (σ, β, w_bg)
# The most channels the kernels composite in one call: colour (3), depth (1) and the features,
# packed (kMaxRasterChannels in gsrender/raster_plan.h; the raster ops check it).
MAX_RASTER_CHANNELS: int = _CONTRACT["max_raster_channels"]
# Feature channels one rasterize call takes (render.py checks it): a policy of the Python API,
# well inside the kernels' packed limit.
MAX_FEATURES = 1024
assert 4 + MAX_FEATURES <= MAX_RASTER_CHANNELS
