"""SplitGS-Loc real-image check on ../shared/data/snowmiku_small (skipped when absent): the
folder has real posed photos and SfM points but no trained 3DGS, so the scene is the SfM points
as small isotropic Gaussians (1.5× the median nearest-neighbour spacing, their colours), refined
for a few Adam steps on the training photos through gsrender.rasterize (colours, opacities,
scales). The map is lifted from the training photos; every third photo is held out and localized.
Translation errors are in the SfM model's units (the plush spans ~20 units)."""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import torch

import gsrender
from gsrender import io as gio
from gsrender.loc import metrics as LM
from gsrender.loc import pipeline as P
from gsrender.loc.features import SiftExtractor
from gsrender.loc.query import localize
from gsrender.scene import GaussianModel, rgb_to_sh


def points_scene(xyz: np.ndarray, rgb: np.ndarray, seed: int = 0) -> GaussianModel:
    means = torch.from_numpy(xyz).float()
    N = means.shape[0]
    g = torch.Generator().manual_seed(seed)
    sample = means[torch.randperm(N, generator=g)[:2000]]
    spacing = float(torch.cdist(sample, means).topk(2, largest=False).values[:, 1].median())
    return GaussianModel(means=means, quats=torch.tensor([[1.0, 0, 0, 0]]).repeat(N, 1),
                         scales=torch.full((N, 3), 1.5 * spacing), opacities=torch.full((N,), 0.9),
                         sh=rgb_to_sh(torch.from_numpy(rgb).float() / 255)[:, None, :])


def fit(model: GaussianModel, vms, Ks, W, H, photos, steps: int = 30) -> GaussianModel:
    """A few Adam steps on colours, opacities and log-scales (positions stay at the SfM points)."""
    rgb = (model.sh[:, 0] * 0.28209479177387814 + 0.5).clamp(0, 1)
    p = {"rgb": rgb.clone().requires_grad_(), "lo": torch.logit(model.opacities).requires_grad_(),
         "ls": model.scales.log().requires_grad_()}
    opt = torch.optim.Adam([{"params": [p["rgb"]], "lr": 0.02}, {"params": [p["lo"]], "lr": 0.05},
                            {"params": [p["ls"]], "lr": 0.01}])
    for _ in range(steps):
        out = gsrender.rasterize(model.means, model.quats, p["ls"].exp(), torch.sigmoid(p["lo"]),
                                 p["rgb"].clamp(0, 1), vms, Ks, W, H)
        loss = (out.colors - photos).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return GaussianModel(means=model.means, quats=model.quats, scales=p["ls"].exp(),
                             opacities=torch.sigmoid(p["lo"]).clamp(1e-3, 0.999),
                             sh=rgb_to_sh(p["rgb"].clamp(0, 1))[:, None, :])


def run_real(folder: Path, fit_steps: int = 10) -> dict | None:
    if not (folder / "cameras_small.json").is_file():
        print(f"real-image check skipped: {folder} absent")
        return None
    import imageio.v3 as iio

    t0 = time.perf_counter()
    cams = gio.load_cameras_json(folder / "cameras_small.json")
    vms, Ks, W, H = gio.stack_cameras(cams)
    photos = torch.from_numpy(np.stack([iio.imread(c.image_path) for c in cams])).float() / 255
    xyz, rgb = np.load(folder / "sfm_points.npz")["xyz"], np.load(folder / "sfm_points.npz")["rgb"]
    held = list(range(1, len(cams), 3))
    train = [i for i in range(len(cams)) if i not in held]
    model = points_scene(xyz, rgb)
    if fit_steps:
        model = fit(model, vms[train], Ks[train], W, H, photos[train], fit_steps)
    t_fit = time.perf_counter() - t0
    sift = SiftExtractor(n_features=2000)
    res = {}
    for name in ("splitgs", "B0"):
        cfg = P.preset(name, max_growth=1.5)
        tb = time.perf_counter()
        m, info = P.build_map(model, vms[train], Ks[train], photos[train], W, H, sift, cfg)
        build_s = time.perf_counter() - tb
        te, re, ms = [], [], []
        for q in held:
            r = localize(photos[q], Ks[q].numpy(), m.points, m.descriptors, sift, reproj_px=4.0)
            vm = vms[q].double().numpy()
            e = LM.pose_errors(vm[:3, :3], vm[:3, 3], r.R, r.t) if r.success else (math.inf,) * 2
            te.append(e[0]), re.append(e[1]), ms.append(r.timings_ms["total"])
        res[name] = {"t_err_units": te, "r_err_deg": re, "map_points": info["map_points"],
                     "build_s": build_s, "query_ms": float(np.median(ms))}
        print(f"snowmiku {name}: map {info['map_points']} pts (build {build_s:.1f}s), held-out "
              f"{len(held)} photos: t err " + ", ".join(f"{x:.3f}" for x in te)
              + " units; r err " + ", ".join(f"{x:.2f}" for x in re) + " deg")
    print(f"snowmiku scene: {model.num_gaussians} Gaussians from SfM points, {fit_steps} Adam "
          f"steps ({t_fit:.1f}s), trained on {len(train)} photos, held out {held}")
    return res
