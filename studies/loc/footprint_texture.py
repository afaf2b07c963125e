"""How Gaussian footprint size relates to local texture: in a real trained 3DGS (plant.splat) and in
the localization benchmark's degraded rooms (gsrender.loc.room.degrade at several texture_corr).

Statistic: over the Gaussians that dominate (are the top contributor of) at least one pixel of a
view, the Spearman rank correlation between the projected footprint (largest 1σ axis, px) and the
image-gradient magnitude (Sobel of the luminance after a σ = 1 px blur) at the projected centre;
pooled over the views. Measured on the model's own rendering (all plant.splat has) and, for the
rooms, also on the ground-truth texture's rendering. Also: the median gradient of the smallest and
largest fifth of footprints.

    python studies/loc/footprint_texture.py [--json out.json]   (tuning seeds 0, 1 only)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import gsrender
from gsrender.io import atomic
from gsrender.io.paths import data_dir
from gsrender.loc import room as RM
from gsrender.loc.split import axis_footprints
from gsrender.loc.stats import view_contributors

# the shared data folder (../shared/data from the project root; GSRENDER_DATA overrides it)
PLANT = data_dir() / "plant" / "plant.splat"
TUNING_SEEDS = (0, 1)  # never used for evaluation (studies/loc/synthetic.py EVAL_SEEDS)
CORRS = (0.0, 0.5, 0.7, 0.8, 0.9, 1.0)


def gradient_magnitude(img: torch.Tensor) -> np.ndarray:
    import cv2

    lum = img.double().mean(-1).numpy()
    lum = cv2.GaussianBlur(lum, (0, 0), 1.0)
    gx, gy = cv2.Sobel(lum, cv2.CV_64F, 1, 0, ksize=3), cv2.Sobel(lum, cv2.CV_64F, 0, 1, ksize=3)
    return np.sqrt(gx * gx + gy * gy) / 8.0  # Sobel's weights sum to 8: per-pixel luminance step


def render(model, vm, K, W, H):
    with torch.no_grad():
        out = gsrender.rasterize(model.means, model.quats, model.scales, model.opacities, model.sh,
                                 vm[None], K[None], W, H, sh_degree=0,
                                 backgrounds=torch.full((3,), 0.5))
    return out.colors[0].clamp(0, 1)


def _rank(x: np.ndarray) -> np.ndarray:
    r = np.empty(len(x))
    r[np.argsort(x, kind="stable")] = np.arange(len(x))
    return r


def footprint_texture(model, viewmats, Ks, W, H, texture=None) -> dict:
    """The statistic above. texture: optional callable view -> RGB image to take gradients of
    (default: the model's own rendering)."""
    fps, grads = [], []
    for c, _, ids, _ in view_contributors(model, viewmats, Ks, W, H, top_k=1):
        vis = torch.unique(ids[..., 0].long())
        vis = vis[vis >= 0]
        img = render(model, viewmats[c], Ks[c], W, H) if texture is None else texture(c)
        g = gradient_magnitude(img)
        vm, K = viewmats[c].double(), Ks[c].double()
        pc = model.means[vis].double() @ vm[:3, :3].T + vm[:3, 3]
        u = (K[0, 0] * pc[:, 0] / pc[:, 2] + K[0, 2]).floor().long().clamp(0, W - 1)
        v = (K[1, 1] * pc[:, 1] / pc[:, 2] + K[1, 2]).floor().long().clamp(0, H - 1)
        fp = axis_footprints(model.means[vis], model.quats[vis], model.scales[vis],
                             viewmats[c:c + 1], Ks[c:c + 1], W, H).amax(1)
        keep = fp > 0
        fps.append(fp[keep].numpy()), grads.append(g[v[keep].numpy(), u[keep].numpy()])
    fp, gr = np.concatenate(fps), np.concatenate(grads)
    rho = float(np.corrcoef(_rank(fp), _rank(gr))[0, 1])
    lo, hi = np.quantile(fp, [0.2, 0.8])
    return {"spearman": rho, "n": int(fp.size), "median_fp_px": float(np.median(fp)),
            "grad_small_fifth": float(np.median(gr[fp <= lo])),
            "grad_large_fifth": float(np.median(gr[fp >= hi]))}


def plant_cameras(model, n=8, W=320, H=240):
    """Orbit cameras around plant.splat (upright along −y), 1.6× its robust radius away."""
    from gsrender.synthetic import intrinsics, look_at

    m = model.means.double()
    lo, hi = torch.quantile(m, 0.02, dim=0), torch.quantile(m, 0.98, dim=0)
    c, r = (lo + hi) / 2, float((hi - lo).norm()) / 2
    a = torch.arange(n, dtype=torch.float64) * 2 * np.pi / n
    eyes = c + torch.stack([1.6 * r * a.cos(), torch.full_like(a, -0.5 * r), 1.6 * r * a.sin()], 1)
    vms = look_at(eyes.float(), c.float().expand(n, 3), up=(0.0, -1.0, 0.0))
    return vms, intrinsics(W, H, 60.0)[None].repeat(n, 1, 1), W, H


def room_stat(seed: int, corr: float, n_gaussians=60_000, W=320, H=240) -> dict:
    room = RM.make_room(n_gaussians, seed=seed, randomize=True)
    smap = RM.degrade(room, texture_corr=corr, seed=seed + 1)
    vms, Ks = RM.loop_cameras(6, radius=0.6, height=1.3, width=W, height_px=H)
    own = footprint_texture(smap, vms, Ks, W, H)
    gt = footprint_texture(smap, vms, Ks, W, H, texture=lambda c: render(room, vms[c], Ks[c], W, H))
    return {"own": own, "gt": gt}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    from gsrender.io import load_splat

    out = {}
    if PLANT.is_file():
        plant = load_splat(PLANT).to(dtype=torch.float32)
        vms, Ks, W, H = plant_cameras(plant)
        out["plant"] = footprint_texture(plant, vms, Ks, W, H)
        print(f"plant.splat ({plant.num_gaussians} Gaussians, 8 views 320×240): {out['plant']}",
              flush=True)
    for corr in CORRS:
        rs = [room_stat(s, corr) for s in TUNING_SEEDS]
        out[f"room_corr_{corr}"] = {k: {key: float(np.mean([r[k][key] for r in rs]))
                                        for key in rs[0][k]} for k in ("own", "gt")}
        o = out[f"room_corr_{corr}"]
        print(f"room texture_corr {corr}: own-rendering spearman {o['own']['spearman']:.3f}, "
              f"GT-texture spearman {o['gt']['spearman']:.3f}, median footprint "
              f"{o['own']['median_fp_px']:.1f} px", flush=True)
    if args.json:
        atomic.write_text(args.json, json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
