"""Lens distortion (docs/cameras.md): OpenCV's pinhole camera with radial k1..k6 (rational),
tangential p1 p2 and thin-prism s1..s4 coefficients, and OpenCV's fisheye (equidistant) camera
with k1..k4, as differentiable PyTorch maps from camera-space points to pixels, each with the
region where it is a valid lens. The coefficients are gsplat's radial_coeffs, tangential_coeffs
and thin_prism_coeffs, one row per camera; the unscented transform (gsrender/unscented.py)
projects Gaussians through these maps.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gsrender import validate as V
from gsrender.contract import CAMERA_MODELS

# the coefficient tensors each lens model takes, with their widths (gsplat's layout: radial
# k1..k6 for pinhole, k1..k4 for fisheye; tangential p1 p2; thin prism s1..s4)
COEFFICIENTS = {
    "pinhole": {"radial_coeffs": 6, "tangential_coeffs": 2, "thin_prism_coeffs": 4},
    "fisheye": {"radial_coeffs": 4},
    "ortho": {},
}
# 3DGUT's limit on the pinhole's radial factor icD = (1 + k1 r² + ...) / (1 + k4 r² + ...):
# at icD ≤ 0 the map folds the image over its centre, which no real lens does; points that come
# close to the fold (icD ≤ 0.8) are outside the lens's valid region.
MIN_RADIAL_FACTOR = 0.8


@dataclass(frozen=True)
class Lens:
    """One lens model for C cameras: Ks [C,3,3], each coefficient tensor of the model [C, width]
    (zeros where not given) and, for a fisheye, the largest valid angle from the axis [C]."""

    model: str
    Ks: torch.Tensor
    coeffs: dict
    max_angle: torch.Tensor | None = None


def lens(camera_model: str, Ks: torch.Tensor, width: int, height: int, radial_coeffs=None,
         tangential_coeffs=None, thin_prism_coeffs=None) -> Lens:
    """The Lens of C cameras (Ks [C,3,3]) from gsplat's coefficient arguments, checked against
    the model: pinhole takes radial [C,6], tangential [C,2], thin prism [C,4]; fisheye radial
    [C,4]; ortho none."""
    V.choice(camera_model, "camera_model", CAMERA_MODELS)
    C = Ks.shape[0]
    given = {"radial_coeffs": radial_coeffs, "tangential_coeffs": tangential_coeffs,
             "thin_prism_coeffs": thin_prism_coeffs}
    widths = COEFFICIENTS[camera_model]
    coeffs = {}
    for name, value in given.items():
        if value is not None and name not in widths:
            raise ValueError(f"{name}: camera_model={camera_model!r} takes no {name} "
                             f"(it takes {sorted(widths) or 'no distortion coefficients'})")
    for name, width_c in widths.items():
        value = given[name]
        if value is None:
            coeffs[name] = Ks.new_zeros(C, width_c)
        else:
            coeffs[name] = V.tensor(value, name, (C, width_c), dtype=Ks.dtype, device=Ks.device)
    max_angle = None
    if camera_model == "fisheye":
        max_angle = _fisheye_max_angle(coeffs["radial_coeffs"], Ks, width, height)
    return Lens(camera_model, Ks, coeffs, max_angle)


def _fisheye_max_angle(k: torch.Tensor, Ks: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """The largest valid angle θ from the axis of each fisheye camera [C] (as gsplat's OpenCV
    fisheye camera): below the first θ where the distorted radius θ_d(θ) = θ(1 + k1θ² + k2θ⁴ +
    k3θ⁶ + k4θ⁸) stops growing (past it the map folds back), and below the angle of the image
    corner farthest from the principal point (max over fx, fy of its pixel radius / f)."""
    ks = k.detach().double().cpu().numpy()
    K = Ks.detach().double().cpu().numpy()
    out = []
    for (k1, k2, k3, k4), Kc in zip(ks, K, strict=True):
        # dθ_d/dθ = 1 + 3k1 t + 5k2 t² + 7k3 t³ + 9k4 t⁴ with t = θ²: its smallest positive root
        roots = np.roots(np.trim_zeros([9 * k4, 7 * k3, 5 * k2, 3 * k1, 1.0], "f"))
        real = roots[(np.abs(roots.imag) <= 1e-9 * np.abs(roots)) & (roots.real > 0)].real
        fold = float(np.sqrt(real.min())) if real.size else np.inf
        fx, fy, cx, cy = Kc[0, 0], Kc[1, 1], Kc[0, 2], Kc[1, 2]
        corner = np.hypot(max(width - cx, cx), max(height - cy, cy))
        out.append(min(fold, max(corner / fx, corner / fy)))
    return torch.tensor(out, dtype=Ks.dtype, device=Ks.device)


def _per_camera(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A per-camera tensor [C] shaped to broadcast against like [C, ...]."""
    return t.reshape(t.shape[0], *([1] * (like.dim() - 1)))


def image_points(lens_: Lens, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Camera-space points p [C, ..., 3] (camera c's points in row c) -> their pixels [C, ..., 2]
    through the lens, and whether each point lies in the lens's valid region [C, ..., ] (bool):
    in front of the camera (z > 0) for pinhole and fisheye, icD > MIN_RADIAL_FACTOR for pinhole,
    θ ≤ max_angle for fisheye. Points outside it map to finite stand-in pixels."""
    x, y, z = p.unbind(-1)
    K = lens_.Ks
    fx, fy = _per_camera(K[:, 0, 0], x), _per_camera(K[:, 1, 1], x)
    cx, cy = _per_camera(K[:, 0, 2], x), _per_camera(K[:, 1, 2], x)
    if lens_.model == "ortho":
        return torch.stack([fx * x + cx, fy * y + cy], dim=-1), torch.ones_like(x, dtype=torch.bool)
    front = z > 0
    zs = torch.where(front, z, torch.ones_like(z))
    col = {name: [_per_camera(c[:, i], x) for i in range(c.shape[1])]
           for name, c in lens_.coeffs.items()}
    if lens_.model == "pinhole":
        k1, k2, k3, k4, k5, k6 = col["radial_coeffs"]
        p1, p2 = col["tangential_coeffs"]
        s1, s2, s3, s4 = col["thin_prism_coeffs"]
        u, v = x / zs, y / zs
        r2 = u * u + v * v
        icd = (1 + r2 * (k1 + r2 * (k2 + r2 * k3))) / (1 + r2 * (k4 + r2 * (k5 + r2 * k6)))
        du = 2 * p1 * u * v + p2 * (r2 + 2 * u * u) + r2 * (s1 + r2 * s2)
        dv = p1 * (r2 + 2 * v * v) + 2 * p2 * u * v + r2 * (s3 + r2 * s4)
        pix = torch.stack([fx * (icd * u + du) + cx, fy * (icd * v + dv) + cy], dim=-1)
        return pix, front & (icd > MIN_RADIAL_FACTOR)
    k1, k2, k3, k4 = col["radial_coeffs"]
    max_angle = _per_camera(lens_.max_angle, x)
    r2 = x * x + y * y
    on_axis = r2 == 0
    r = torch.sqrt(torch.where(on_axis, torch.ones_like(r2), r2))
    theta = torch.atan2(r, zs)
    th = torch.minimum(theta, max_angle)  # bounded stand-in beyond the valid cone
    t2 = th * th
    theta_d = th * (1 + t2 * (k1 + t2 * (k2 + t2 * (k3 + t2 * k4))))
    # θ_d / r along (x, y); on the axis its limit 1/z
    s = torch.where(on_axis, 1 / zs, theta_d / r)
    pix = torch.stack([fx * s * x + cx, fy * s * y + cy], dim=-1)
    return pix, front & (on_axis | (theta <= max_angle))
