"""Rendering a GaussianModel from one Camera and saving its pictures: what the CLI commands, the
demo's turntable and the viewer share."""
from __future__ import annotations

from pathlib import Path

import torch

from gsrender import viz
from gsrender.io.cameras import lens_arguments
from gsrender.render import rasterize


def render_view(model, cam, device: torch.device, *, mode: str = "sorted", precision: str = "auto",
                background=None, features: bool = True, profile: bool = False, sh_degree=None):
    """rasterize() one Camera: RGB (SH colours), depth, alpha and the model's features if any."""
    deg = model.sh_degree if sh_degree is None else min(int(sh_degree), model.sh_degree)
    bg = None if background is None else torch.as_tensor(background, dtype=torch.float32, device=device)
    return rasterize(
        model.means, model.quats, model.scales, model.opacities, model.sh,
        cam.viewmat[None].to(device), cam.K[None].to(device), cam.width, cam.height,
        sh_degree=deg, features=model.features if features else None, backgrounds=bg, mode=mode,
        precision=precision, backend=device.type, profile=profile, camera_model=cam.model,
        **lens_arguments([cam.distortion], device))


def _name(kind: str, i: int, n: int) -> str:
    return f"{kind}_{i:0{max(2, len(str(n - 1)))}d}.png"


def save_views(out, folder: Path, i: int, n: int, what: set[str], pca: dict | None = None) -> dict:
    """Writes the requested pictures of view i; returns {kind: image} for reuse. pca: a
    viz.pca_basis to colour the features of every view alike (fitted on this view when None)."""
    alpha = out.alphas[0]
    imgs = {}
    if "rgb" in what:
        imgs["rgb"] = viz.to_uint8(out.colors[0])
    if "depth" in what:
        imgs["depth"] = viz.depth_to_color(out.depths[0], alpha)
    if "alpha" in what:
        imgs["alpha"] = viz.to_uint8(alpha)
    if "features" in what and out.features is not None:
        imgs["features_pca"] = viz.feature_pca(out.features[0], alpha, basis=pca)
    for kind, img in imgs.items():
        viz.save_image(folder / _name(kind, i, n), img)
    return imgs
