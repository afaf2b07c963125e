"""Real geometry: the Mip-NeRF 360 garden points shipped with gsplat's tests, as a scene."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from gsrender.cameras import check_int
from gsrender.scene import GaussianModel
from gsrender.synthetic.gaussians import _check_sh_degree, _generator, _sh_from_rgb, random_quats


def garden_scene(npz_path, seed: int = 0, crop: bool = True, tiles: int = 1, sh_degree: int = 0):
    """gsplat-style test scene from test_garden.npz: (GaussianModel, viewmats [3,4,4], Ks [3,3,3],
    width, height).

    Means are the real points (optionally cropped to [-2,2]^3), colours → SH DC, and, drawn from a
    seeded torch.Generator as gsplat's tests do: random unit quats, scales uniform in
    [1e-4, 0.02], opacities uniform in (0,1) (clamped to >= 1e-4). tiles=k repeats the scene on a
    k×k grid in x/y with offsets (i − k//2)·extent, extent = the crop box (4) or the points'
    bounding box, so the copy at offset 0 stays under the real cameras (a larger scene, same
    views). sh_degree > 0 adds small random higher SH bands.
    """
    path = Path(npz_path)
    tiles = check_int(tiles, "tiles")
    sh_degree = _check_sh_degree(sh_degree)
    if not path.is_file():
        raise ValueError(f"npz_path: no such file {str(path)!r}")
    with np.load(path, allow_pickle=False) as d:
        missing = {"means3d", "colors", "viewmats", "Ks", "width", "height"} - set(d.files)
        if missing:
            raise ValueError(f"npz_path: {str(path)!r} lacks arrays {sorted(missing)}")
        means = torch.from_numpy(np.asarray(d["means3d"], dtype=np.float32))
        colors = torch.from_numpy(np.asarray(d["colors"], dtype=np.float32) / 255.0)
        viewmats = torch.from_numpy(np.asarray(d["viewmats"], dtype=np.float32))
        ks = torch.from_numpy(np.asarray(d["Ks"], dtype=np.float32))
        width, height = int(d["width"]), int(d["height"])
    if means.ndim != 2 or means.shape[1] != 3 or colors.shape != means.shape:
        raise ValueError(f"npz_path: means3d/colors must be [N,3] alike, got {tuple(means.shape)}, "
                         f"{tuple(colors.shape)}")
    if crop:
        keep = ((means >= -2.0) & (means <= 2.0)).all(dim=1)
        means, colors = means[keep], colors[keep]
        extent = torch.full((3,), 4.0)
    else:
        extent = means.max(0).values - means.min(0).values
    if means.shape[0] == 0:
        raise ValueError(f"npz_path: no points left in {str(path)!r} after cropping")
    if tiles > 1:
        g = torch.arange(tiles, dtype=torch.float32) - tiles // 2
        gx, gy = torch.meshgrid(g, g, indexing="ij")
        offs = torch.stack([gx, gy, torch.zeros_like(gx)], -1).reshape(-1, 3) * extent  # [k*k, 3]
        means = (means[None] + offs[:, None]).reshape(-1, 3)
        colors = colors.repeat(tiles * tiles, 1)
    gen = _generator(seed, None)
    n = means.shape[0]
    quats = random_quats(n, gen)
    scales = 1e-4 + torch.rand(n, 3, generator=gen) * (0.02 - 1e-4)
    opac = torch.rand(n, generator=gen).clamp_min(1e-4)
    model = GaussianModel(means=means.contiguous(), quats=quats, scales=scales, opacities=opac,
                          sh=_sh_from_rgb(colors, sh_degree, gen),
                          meta={"source": str(path), "seed": int(seed), "crop": bool(crop), "tiles": tiles})
    return model, viewmats, ks, width, height

