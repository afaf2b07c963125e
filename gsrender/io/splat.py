"""The web-viewer `.splat` format: 32 bytes a Gaussian, base colour only (SH degree 0).

Record: position float32x3, scale float32x3 (linear), colour RGBA uint8x4 (A = opacity*255),
rotation uint8x4 (wxyz, byte = q*128 + 128).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from gsrender.scene import GaussianModel, rgb_to_sh, sh_to_rgb

_RECORD = np.dtype([("pos", "<f4", 3), ("scale", "<f4", 3), ("rgba", "u1", 4), ("rot", "u1", 4)])
assert _RECORD.itemsize == 32
# The format cannot say "fully transparent" or "fully opaque" apart from 0/255; keep the model valid.
_OPACITY_RANGE = (1e-4, 0.9999)
_MIN_SCALE = 1e-7


def load_splat(path: str | os.PathLike) -> GaussianModel:
    """Load a .splat file as a degree-0 GaussianModel."""
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"{path}: empty .splat file")
    if size % _RECORD.itemsize:
        raise ValueError(f"{path}: length {size} is not a multiple of 32 bytes; not a .splat file "
                         f"or truncated")
    data = np.fromfile(path, dtype=_RECORD, count=size // _RECORD.itemsize)
    pos = data["pos"]  # [N, 3]
    scale = data["scale"].astype(np.float32)  # [N, 3]
    if not np.isfinite(pos).all():
        raise ValueError(f"{path}: non-finite positions")
    if not np.isfinite(scale).all():
        raise ValueError(f"{path}: non-finite scales")
    if (scale < 0).any():
        raise ValueError(f"{path}: negative scales (the .splat format stores linear scales)")
    scale = np.maximum(scale, _MIN_SCALE)

    rgba = data["rgba"].astype(np.float32) / 255.0  # [N, 4]
    q = (data["rot"].astype(np.float32) - 128.0) / 128.0  # [N, 4] wxyz
    norm = np.linalg.norm(q, axis=1, keepdims=True)  # [N, 1]
    # All-128 bytes decode to a zero quaternion; the identity is the only sensible reading.
    zero = norm[:, 0] == 0
    q[zero] = (1.0, 0.0, 0.0, 0.0)
    norm[zero] = 1.0
    q = q / norm

    rgb = torch.from_numpy(np.ascontiguousarray(rgba[:, :3]))
    opac = np.clip(rgba[:, 3], *_OPACITY_RANGE).astype(np.float32)
    return GaussianModel(
        means=torch.from_numpy(np.ascontiguousarray(pos)),
        quats=torch.from_numpy(q),
        scales=torch.from_numpy(scale),
        opacities=torch.from_numpy(opac),
        sh=rgb_to_sh(rgb)[:, None, :].contiguous(),  # [N, 1, 3]
        meta={"source": str(path)},
    )


def save_splat(path: str | os.PathLike, model: GaussianModel) -> None:
    """Write model as .splat (lossy: colour and opacity to 8 bits, rotation to 8 bits a component,
    higher SH, features and object ids dropped)."""
    n = model.num_gaussians
    if n == 0:
        raise ValueError("model: has 0 Gaussians")
    means = model.means.detach().cpu().float().numpy()
    scales = model.scales.detach().cpu().float().numpy()
    quats = model.quats.detach().cpu().double().numpy()
    opac = model.opacities.detach().cpu().double().numpy()
    rgb = sh_to_rgb(model.sh[:, 0, :].detach().cpu().double()).numpy()  # [N, 3]
    for name, a in (("means", means), ("scales", scales), ("quats", quats), ("opacities", opac),
                    ("sh", rgb)):
        if not np.isfinite(a).all():
            raise ValueError(f"model.{name}: non-finite values")
    norm = np.linalg.norm(quats, axis=1, keepdims=True)
    if (norm == 0).any():
        raise ValueError("model.quats: zero quaternions")
    quats = quats / norm
    # q and -q are the same rotation; w >= 0 keeps the 8-bit code away from the -1 end, which
    # the format cannot represent exactly (byte 0 = -1, 255 = +0.992).
    quats = np.where(quats[:, :1] < 0, -quats, quats)

    rec = np.empty(n, dtype=_RECORD)
    rec["pos"] = means
    rec["scale"] = scales
    rgba = np.concatenate([rgb, opac[:, None]], axis=1)  # [N, 4]
    rec["rgba"] = np.clip(np.round(rgba * 255.0), 0, 255).astype(np.uint8)
    rec["rot"] = np.clip(np.round(quats * 128.0 + 128.0), 0, 255).astype(np.uint8)
    rec.tofile(Path(path))
