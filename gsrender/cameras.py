"""Cameras: pinhole intrinsics, look-at poses and orbits.

Conventions (docs/design.md §3): viewmats are world-to-camera OpenCV matrices (x right, y down,
z forward); Ks are pinhole matrices with square pixels whose principal point is the image centre
(W/2, H/2), so with pixel centres at (x + 0.5, y + 0.5) a point straight ahead lands in the middle
of the image. The one camera record is gsrender.io.cameras.Camera, and camera JSON is read and
written beside it, in gsrender.io.camera_json (both re-exported here).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from gsrender.io.camera_json import (
    CameraEntry,
    cameras_from_json,
    cameras_to_json,
    load_cameras_json,
    read_cameras_json,
    save_cameras_json,
)
from gsrender.io.cameras import Camera, stack_cameras

__all__ = ["UP_AXES", "WORLD_UP", "Camera", "CameraEntry", "cameras_from_json", "cameras_to_json", "intrinsics",
           "load_cameras_json", "look_at", "orbit_cameras", "pinhole", "read_cameras_json", "rig",
           "save_cameras_json", "scene_orbit", "stack_cameras"]

WORLD_UP = (0.0, 0.0, 1.0)  # gsrender.synthetic's scenes: +z up, ground at z = 0
UP_AXES = {"+x": (1, 0, 0), "-x": (-1, 0, 0), "+y": (0, 1, 0), "-y": (0, -1, 0), "+z": (0, 0, 1),
           "-z": (0, 0, -1)}

# ----------------------------------------------------------------------------------------------
# argument checks (shared with gsrender.synthetic: every error names the argument)


def check_vec(x, name: str, last: int = 3) -> torch.Tensor:
    """x as a finite float64 tensor of shape [..., last]."""
    t = torch.as_tensor(x, dtype=torch.float64)
    if t.ndim == 0 or t.shape[-1] != last:
        raise ValueError(f"{name}: expected shape [..., {last}], got {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name}: contains NaN or Inf")
    return t


def check_int(x, name: str, minimum: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{name}: expected an int, got {type(x).__name__}")
    if x < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {x}")
    return int(x)


def check_positive(x, name: str) -> float:
    x = float(x)
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{name}: must be a positive finite number, got {x}")
    return x


def normalize(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _up_vector(up) -> torch.Tensor:
    """An UP_AXES key ("+z", "-y", ...) or a 3-vector -> unit float64 [3]."""
    if isinstance(up, str):
        if up not in UP_AXES:
            raise ValueError(f"up: expected one of {tuple(UP_AXES)} or a 3-vector, got {up!r}")
        up = UP_AXES[up]
    return normalize(check_vec(up, "up").reshape(3))


# ----------------------------------------------------------------------------------------------
# intrinsics and poses


def pinhole(width: int, height: int, focal: float, dtype=torch.float32) -> torch.Tensor:
    """Pinhole K [3,3] with focal length `focal` px on both axes (square pixels) and the principal
    point at the image centre (W/2, H/2)."""
    return torch.tensor([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]],
                        dtype=dtype)


def intrinsics(width: int, height: int, fov_deg: float = 60.0, dtype=torch.float32) -> torch.Tensor:
    """pinhole K [3,3] with *horizontal* field of view fov_deg."""
    width = check_int(width, "width")
    height = check_int(height, "height")
    fov = float(fov_deg)
    if not 0.0 < fov < 180.0:
        raise ValueError(f"fov_deg: must be in (0, 180), got {fov_deg}")
    return pinhole(width, height, 0.5 * width / math.tan(math.radians(fov) / 2), dtype)


def look_at(eye, target, up=WORLD_UP) -> torch.Tensor:
    """World-to-camera OpenCV viewmat(s) of cameras at `eye` looking at `target`.

    eye, target: [3] or [C,3] (broadcast). up: the world up direction (a 3-vector or an UP_AXES
    key); the camera's y axis (image down) is the component of -up orthogonal to the view
    direction. When the view direction is parallel to `up` (looking straight down), the world axis
    least aligned with it stands in for `up`, so the result is always a proper rotation.
    Returns [4,4] for a single camera, else [C,4,4] (float64 inside, float32 out).
    """
    eye = check_vec(eye, "eye")
    target = check_vec(target, "target")
    up = _up_vector(up)
    single = eye.ndim == 1 and target.ndim == 1
    eye, target = torch.broadcast_tensors(eye.reshape(-1, 3), target.reshape(-1, 3))
    fwd = target - eye  # [C, 3]
    dist = fwd.norm(dim=-1, keepdim=True)
    if (dist < 1e-9).any():
        raise ValueError("eye: coincides with target, the view direction is undefined")
    fwd = fwd / dist
    upc = up.reshape(-1, 3).expand_as(fwd).clone()
    right = torch.cross(fwd, upc, dim=-1)
    bad = right.norm(dim=-1) < 1e-6
    if bad.any():
        alt = torch.eye(3, dtype=fwd.dtype)[fwd[bad].abs().argmin(dim=-1)]
        right[bad] = torch.cross(fwd[bad], alt, dim=-1)
    right = normalize(right)
    down = torch.cross(fwd, right, dim=-1)  # z × x = y: right-handed x right, y down, z forward
    rot = torch.stack([right, down, fwd], dim=-2)  # [C, 3, 3] rows = camera axes in world
    vm = torch.eye(4, dtype=torch.float64).repeat(fwd.shape[0], 1, 1)
    vm[:, :3, :3] = rot
    vm[:, :3, 3] = -(rot @ eye[..., None])[..., 0]
    vm = vm.float()
    return vm[0] if single else vm


def rig(eyes, targets, width: int, height: int, fov_deg: float, up=WORLD_UP):
    """Cameras at `eyes` looking at `targets`, one K for all: (viewmats [C,4,4], Ks [C,3,3])."""
    vms = look_at(eyes, targets, up)
    if vms.ndim == 2:
        vms = vms[None]
    ks = intrinsics(width, height, fov_deg)[None].repeat(vms.shape[0], 1, 1)
    return vms, ks


# ----------------------------------------------------------------------------------------------
# orbits


def _plane_basis(up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit e1, e2 spanning the plane normal to `up`, right-handed (e1 × e2 = up): e1 is the world
    axis least aligned with up, made orthogonal to it (+x for up = +z, so e2 = +y)."""
    axis = torch.eye(3, dtype=torch.float64)[up.abs().argmin()]
    e1 = normalize(axis - (axis @ up) * up)
    return e1, torch.linalg.cross(up, e1)


def orbit_cameras(n: int, radius: float, height: float, target=(0.0, 0.0, 0.0), width: int = 640,
                  height_px: int = 480, fov_deg: float = 60.0, start_deg: float = 0.0, up=WORLD_UP):
    """n cameras evenly spaced on a circle of `radius` around `target` in the plane normal to `up`,
    `height` above it along up, all looking at target. Camera i is at azimuth start_deg + 360·i/n
    (for up = +z: from +x towards +y; see _plane_basis). Returns (viewmats [n,4,4], Ks [n,3,3])."""
    n = check_int(n, "n")
    radius = check_positive(radius, "radius")
    tgt = check_vec(target, "target")
    u = _up_vector(up)
    e1, e2 = _plane_basis(u)
    a = torch.deg2rad(float(start_deg) + 360.0 * torch.arange(n, dtype=torch.float64) / n)[:, None]
    eyes = tgt + radius * (a.cos() * e1 + a.sin() * e2) + float(height) * u
    return rig(eyes, tgt, width, height_px, fov_deg, u)


def scene_orbit(means: torch.Tensor, n: int, width: int, height: int, fov_deg: float = 60.0, up="+z",
                elevation_deg: float = 20.0, distance_scale: float = 1.0) -> list[Camera]:
    """n Cameras on an orbit fitted to a scene, looking at its centre: centre = per-axis median of
    the means, radius = half the diagonal of the 2..98 percentile bounding box (robust to stray
    Gaussians), far enough that this sphere fits the narrower field of view, elevation_deg above
    the plane normal to `up` (an UP_AXES key or a 3-vector). Camera 0 is on the e2 axis of
    _plane_basis (+y for up = +z)."""
    n = check_int(n, "n")
    pts = means.detach().cpu().double()
    if pts.shape[0] > 1_000_000:  # percentiles on a deterministic subsample: same answer, less time
        pts = pts[:: pts.shape[0] // 1_000_000]
    centre = pts.median(dim=0).values  # [3]
    lo, hi = (torch.from_numpy(np.percentile(pts.numpy(), q, axis=0)) for q in (2.0, 98.0))
    radius = max(0.5 * float((hi - lo).norm()), 1e-6)
    K = intrinsics(width, height, fov_deg)
    half_fov = math.atan(0.5 * min(width / K[0, 0].item(), height / K[1, 1].item()))
    dist = check_positive(distance_scale, "distance_scale") * radius / math.sin(half_fov)
    el = math.radians(elevation_deg)
    vms, ks = orbit_cameras(n, dist * math.cos(el), dist * math.sin(el), centre, width, height, fov_deg,
                            start_deg=90.0, up=up)
    return [Camera(name=f"orbit_{i:03d}", width=width, height=height, K=k, viewmat=vm)
            for i, (vm, k) in enumerate(zip(vms, ks))]
