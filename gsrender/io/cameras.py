"""Camera: one view (OpenCV world-to-camera, a pinhole, ortho or fisheye lens, optionally with
lens distortion coefficients), and stacking views for the renderer."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from gsrender.contract import CAMERA_MODELS
from gsrender.distortion import COEFFICIENTS


@dataclass
class Camera:
    """A camera. K [3,3] float32, viewmat [4,4] float32 world-to-camera (OpenCV axes), model the
    lens: "pinhole", "ortho" or "fisheye" (equidistant; docs/cameras.md). distortion: the lens's
    non-zero distortion coefficients in gsplat's layout, {"radial_coeffs": [6] (pinhole k1..k6)
    or [4] (fisheye k1..k4), "tangential_coeffs": [2], "thin_prism_coeffs": [4]} (float32; any
    subset the model takes), rendered through the unscented transform; empty: none."""

    name: str
    width: int
    height: int
    K: torch.Tensor
    viewmat: torch.Tensor
    image_path: Path | None = None
    model: str = "pinhole"
    distortion: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.model not in CAMERA_MODELS:
            raise ValueError(f"model: expected one of {CAMERA_MODELS}, got {self.model!r} "
                             f"(camera {self.name!r})")
        self.distortion = _checked_distortion(self.distortion, self.model, self.name)
        self.K = torch.as_tensor(self.K, dtype=torch.float32)
        self.viewmat = torch.as_tensor(self.viewmat, dtype=torch.float32)
        if self.K.shape != (3, 3):
            raise ValueError(f"K: expected shape [3, 3], got {list(self.K.shape)} (camera {self.name!r})")
        if self.viewmat.shape != (4, 4):
            raise ValueError(
                f"viewmat: expected shape [4, 4], got {list(self.viewmat.shape)} (camera {self.name!r})")
        if not (torch.isfinite(self.K).all() and torch.isfinite(self.viewmat).all()):
            raise ValueError(f"K/viewmat: non-finite values (camera {self.name!r})")
        if int(self.width) != self.width or int(self.height) != self.height:
            raise ValueError(f"width/height: must be integers, got {self.width}x{self.height}")
        self.width, self.height = int(self.width), int(self.height)
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"width/height: must be positive, got {self.width}x{self.height}")
        if self.image_path is not None:
            self.image_path = Path(self.image_path)

    def resized(self, width: int, height: int) -> Camera:
        """The same view at another image size: K scales per axis (fx, cx by width; fy, cy by height)."""
        K = self.K.clone()
        K[0, :] *= width / self.width   # [3]
        K[1, :] *= height / self.height  # [3]
        return replace(self, width=width, height=height, K=K)


def _checked_distortion(coeffs: dict, model: str, name: str) -> dict:
    widths = COEFFICIENTS[model]
    out = {}
    for key, value in dict(coeffs).items():
        if key not in widths:
            raise ValueError(f"distortion: a {model!r} camera takes {sorted(widths) or 'none'}, got "
                             f"{key!r} (camera {name!r})")
        t = torch.as_tensor(value, dtype=torch.float32).reshape(-1)
        if t.shape != (widths[key],) or not bool(torch.isfinite(t).all()):
            raise ValueError(f"distortion: {key} must hold {widths[key]} finite numbers, got "
                             f"{t.tolist()} (camera {name!r})")
        out[key] = t
    return out


def lens_arguments(distortions: list[dict], device=None) -> dict:
    """rasterize's lens keywords for a batch of cameras' distortion dicts (Camera.distortion):
    {} when none has any, else with_ut=True and each coefficient tensor [C, width] (zeros for the
    cameras without it) on `device`."""
    names = sorted({k for d in distortions for k in d})
    if not names:
        return {}
    out = {"with_ut": True}
    for k in names:
        width = next(d[k].shape[0] for d in distortions if k in d)
        out[k] = torch.stack([d[k] if k in d else torch.zeros(width)
                              for d in distortions]).to(device)
    return out


def stack_cameras(cams: list[Camera]) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """(viewmats [C,4,4], Ks [C,3,3], width, height); all cameras must share one image size and
    one lens model (cams[0].model is the batch's camera_model)."""
    cams = list(cams)
    if not cams:
        raise ValueError("cams: need at least one Camera")
    sizes = {(c.width, c.height) for c in cams}
    if len(sizes) != 1:
        raise ValueError(f"cams: image sizes differ ({sorted(sizes)}); render them in separate batches")
    models = {c.model for c in cams}
    if len(models) != 1:
        raise ValueError(f"cams: lens models differ ({sorted(models)}); render them in separate batches")
    width, height = sizes.pop()
    viewmats = torch.stack([c.viewmat for c in cams])  # [C, 4, 4]
    Ks = torch.stack([c.K for c in cams])  # [C, 3, 3]
    return viewmats, Ks, width, height
