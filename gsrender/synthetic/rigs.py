"""Camera rigs for the synthetic scenes (+z up): hemisphere rings, forward trajectories, and the
pinhole projection of points. Orbits, look-at and intrinsics are gsrender.cameras'."""
from __future__ import annotations

import math

import torch

from gsrender.cameras import WORLD_UP, check_int, check_positive, check_vec, rig


def hemisphere_rings(n_rings: int = 3, per_ring: int = 8, radius: float = 4.0, target=(0.0, 0.0, 0.0),
                     width: int = 640, height_px: int = 480, fov_deg: float = 60.0,
                     min_elev_deg: float = 15.0, max_elev_deg: float = 60.0):
    """Rings of cameras on the upper hemisphere of `radius` around `target`, elevations evenly
    spaced in [min_elev_deg, max_elev_deg]; odd rings are rotated by half a step so views
    interleave. Returns (viewmats [R*P,4,4], Ks [R*P,3,3]), ring-major."""
    n_rings = check_int(n_rings, "n_rings")
    per_ring = check_int(per_ring, "per_ring")
    radius = check_positive(radius, "radius")
    if not -90.0 < min_elev_deg <= max_elev_deg < 90.0:
        raise ValueError(f"min_elev_deg/max_elev_deg: need -90 < min <= max < 90, "
                         f"got {min_elev_deg}, {max_elev_deg}")
    tgt = check_vec(target, "target")
    elev = torch.linspace(min_elev_deg, max_elev_deg, n_rings, dtype=torch.float64)
    if n_rings == 1:
        elev = torch.tensor([0.5 * (min_elev_deg + max_elev_deg)], dtype=torch.float64)
    eyes = []
    for r, e in enumerate(torch.deg2rad(elev)):
        az = torch.deg2rad(360.0 * (torch.arange(per_ring, dtype=torch.float64) + 0.5 * (r % 2)) / per_ring)
        eyes.append(radius * torch.stack([e.cos() * az.cos(), e.cos() * az.sin(), e.sin().expand_as(az)], -1))
    return rig(torch.cat(eyes) + tgt, tgt, width, height_px, fov_deg)


def forward_trajectory(n: int, start, end, width: int = 640, height_px: int = 480, fov_deg: float = 60.0,
                       look_ahead: float = 1.0, sway: float = 0.0, sway_periods: float = 1.0):
    """n cameras moving in a straight line from start to end, looking along the direction of travel
    (a driving / walking sequence). `sway` adds a sideways sinusoidal offset (world units) with
    `sway_periods` periods along the path. Returns (viewmats [n,4,4], Ks [n,3,3])."""
    n = check_int(n, "n")
    start = check_vec(start, "start")
    end = check_vec(end, "end")
    look_ahead = check_positive(look_ahead, "look_ahead")
    d = end - start
    if d.norm() < 1e-9:
        raise ValueError("end: coincides with start, the direction of travel is undefined")
    d = d / d.norm()
    t = torch.linspace(0, 1, n, dtype=torch.float64) if n > 1 else torch.zeros(1, dtype=torch.float64)
    side = torch.cross(d, torch.tensor(WORLD_UP, dtype=torch.float64), dim=-1)
    side = side / side.norm() if side.norm() > 1e-6 else torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    off = float(sway) * torch.sin(2 * math.pi * float(sway_periods) * t)
    eyes = start + t[:, None] * (end - start) + off[:, None] * side
    return rig(eyes, eyes + look_ahead * d, width, height_px, fov_deg)


def project_points(points, viewmats: torch.Tensor, Ks: torch.Tensor):
    """Pinhole projection of world points: returns (uv [C,N,2] pixel coordinates, depth [C,N])."""
    p = check_vec(points, "points").reshape(-1, 3).float()
    vm = torch.as_tensor(viewmats, dtype=torch.float32).reshape(-1, 4, 4)
    ks = torch.as_tensor(Ks, dtype=torch.float32).reshape(-1, 3, 3)
    pc = torch.einsum("cij,nj->cni", vm[:, :3, :3], p) + vm[:, None, :3, 3]  # [C, N, 3]
    z = pc[..., 2]
    uv = torch.einsum("cij,cnj->cni", ks[:, :2, :], pc / z[..., None])  # [C, N, 2]
    return uv, z

