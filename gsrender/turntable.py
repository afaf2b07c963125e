"""The demo's real scene: the bundled plant capture (data/plant, CC-BY-4.0, Marcel Padilla) on
an orbit of cameras, as RGB / expected depth / alpha PNGs, a contact sheet and a turntable GIF."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from gsrender import viz
from gsrender.cameras import scene_orbit
from gsrender.io.paths import repo_root
from gsrender.views import render_view, save_views

CREDIT = "plant: CC-BY-4.0, Marcel Padilla (marcelpadilla/splats)"


def plant_path() -> Path:
    return repo_root() / "data" / "plant" / "plant.splat"


def render_turntable(model, device: torch.device, out_dir: Path, *, frames: int = 24, size: int = 320,
                     up: str = "-y", fov_deg: float = 40.0, elevation_deg: float = 15.0,
                     fps: float = 12.0, sheet_views: int = 4) -> dict:
    """Renders `frames` orbit views (size x size) of model into out_dir: rgb/depth/alpha PNGs per
    view, overview.png (sheet_views of them as rows) and turntable.gif (RGB, looping).
    Returns {"frames", "size", "render_ms" (median per view), "seconds" (all of it)}."""
    import imageio.v3 as iio

    if frames < 1:
        raise ValueError(f"frames: must be >= 1, got {frames}")
    t_all = time.perf_counter()
    cams = scene_orbit(model.means, frames, size, size, fov_deg, up, elevation_deg)
    out_dir.mkdir(parents=True, exist_ok=True)
    rgb, sheet, ms = [], [], []
    every = max(1, frames // sheet_views)
    for i, cam in enumerate(cams):
        t0 = time.perf_counter()
        with torch.no_grad():
            out = render_view(model, cam, device, features=False)
            ms.append((time.perf_counter() - t0) * 1e3)
            imgs = save_views(out, out_dir, i, frames, {"rgb", "depth", "alpha"})
        rgb.append(imgs["rgb"])
        if i % every == 0 and len(sheet) < sheet_views:
            sheet.append([imgs["rgb"], imgs["depth"], imgs["alpha"]])
    viz.save_contact_sheet(out_dir / "overview.png", sheet,
                           row_labels=[f"{360 * i * every // frames}°" for i in range(len(sheet))],
                           col_labels=["RGB", "expected depth", "alpha"])
    iio.imwrite(out_dir / "turntable.gif", np.stack(rgb), duration=1000.0 / fps, loop=0)
    return {"frames": frames, "size": size, "render_ms": float(np.median(ms)),
            "seconds": time.perf_counter() - t_all}
