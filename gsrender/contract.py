"""The rendering contract's thresholds (docs/design.md §3), read from their one definition in the
kernels (csrc/include/gsrender/common.h) so the float64 reference, packing, radii and the tests
can never disagree with what the kernels do."""
from __future__ import annotations

from gsrender import _C

_CONTRACT = _C.contract()
ALPHA_MIN: float = _CONTRACT["alpha_min"]  # a (pixel, Gaussian) pair contributes iff α ≥ 1/255
ALPHA_MIN_INV: float = _CONTRACT["alpha_min_inv"]  # 255: support level ln(255·o), one exact multiply
ALPHA_MAX: float = _CONTRACT["alpha_max"]  # α = min(0.99, o·exp(−σ))
TRANSMITTANCE_MIN: float = _CONTRACT["transmittance_min"]  # stop where T·(1−α) < 1e-4 (3DGS)
