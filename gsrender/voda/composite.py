"""The composite Removal-3D object: a real trained 3DGS (the potted plant bundled in data/plant,
plant.splat, Marcel Padilla, CC-BY-4.0) standing on the synthetic room's floor, so every one of
its Gaussians has an exact ground-truth id.

The .splat stands upright along −y; it is turned to the room's +z up, rotated about z by a
seeded yaw, scaled to `height` and put on the floor at `center`. To fit the protocol's compute
budget on a loaded 2-core machine (the full model costs ~10x the time per training) it is
decimated to n Gaussians by a seeded uniform random subset (every Gaussian equally likely), each
kept Gaussian's scales grown by (N/n)^(1/3) so the decimated model still covers its volume. That
changes the model (fewer Gaussians occlude each other, so fewer are hidden), which is why the
tables report the hidden share of the object as evaluated, and why the undecimated model
(structure "plant_full") was run on a subset of the seeds beside it: the same seed gives the
same yaw and placement with and without decimation."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import torch

from gsrender.scene import GaussianModel
from gsrender.synthetic import quat_multiply

PLANT = Path(__file__).resolve().parents[2] / "data" / "plant" / "plant.splat"  # bundled
PLANT_HEIGHT = 0.7  # m: about the synthetic objects' size scale (0.45-0.7 m)
PLANT_GAUSSIANS = 12000  # the decimated plant of the protocol (set by its cost, before any run)


def _up_minus_y_to_z(yaw: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotation matrix and wxyz quaternion turning −y up into +z up, then yaw about z."""
    ax = torch.tensor([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]]).T  # y -> -z, z -> y: -90° about x
    c, s = math.cos(yaw), math.sin(yaw)
    rz = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    qx = torch.tensor([math.cos(-math.pi / 4), math.sin(-math.pi / 4), 0.0, 0.0])
    qz = torch.tensor([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
    return rz @ ax, quat_multiply(qz, qx)


def plant_object(center, object_id: int, seed: int, n: int | None = PLANT_GAUSSIANS,
                 height: float = PLANT_HEIGHT, path: Path = PLANT) -> GaussianModel:
    """The plant as object `object_id`: n of its Gaussians (all when n is None or not below its
    count), upright on z = center[2] (its 1st-percentile lowest point), centred at center[:2],
    `height` tall (1st to 99th percentile), at a seeded yaw."""
    from gsrender.io import load_splat

    if not Path(path).exists():
        raise FileNotFoundError(f"path: no plant.splat at {path} (the bundled data/plant is missing)")
    m = load_splat(path)
    gen = torch.Generator().manual_seed(seed)
    N = m.num_gaussians
    if n is not None and n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    perm = torch.randperm(N, generator=gen)  # drawn even when all are kept: the same yaw per seed
    if n is not None and n < N:
        m = m.subset(perm[:n])
        m = replace(m, scales=m.scales * (N / n) ** (1 / 3))
    yaw = 2 * math.pi * float(torch.rand(1, generator=gen))
    R, q = _up_minus_y_to_z(yaw)
    x = m.means @ R.T
    lo = torch.quantile(x, 0.01, dim=0)
    hi = torch.quantile(x, 0.99, dim=0)
    s = height / float(hi[2] - lo[2])
    mid = 0.5 * (lo + hi)
    c = torch.tensor(center, dtype=torch.float32)
    x = (x - torch.stack([mid[0], mid[1], lo[2]])) * s + c
    quats = quat_multiply(q.expand_as(m.quats), m.quats)
    return replace(m, means=x.float(), quats=quats, scales=m.scales * s,
                   object_ids=torch.full((m.num_gaussians,), int(object_id), dtype=torch.int64))
