"""Held-out query simulation for the localization benchmarks: query images and depth rendered
from a ground-truth scene, the photometric change a query photo has against the training images,
ground-truth 3-d points of query pixels (to score the 3-d error of a map's inlier points), and
the per-query evaluation of a map."""
from __future__ import annotations

import math

import numpy as np
import torch

from gsrender.loc import diagnostics as D
from gsrender.loc import metrics as LM
from gsrender.loc.lift import LiftedMap
from gsrender.loc.query import DEFAULT_RATIO, localize
from gsrender.loc.rays import pixel_rays
from gsrender.render import rasterize
from gsrender.scene import GaussianModel


def render_views(model: GaussianModel, viewmats, Ks, W: int, H: int, bg: float = 0.5):
    """RGB [C,H,W,3] in [0,1] and expected z-depth [C,H,W] (depth/alpha) of model, one view at a
    time (bounded memory), on a grey background of value bg."""
    rgbs, depths = [], []
    for c in range(viewmats.shape[0]):
        with torch.no_grad():
            out = rasterize(model.means, model.quats, model.scales, model.opacities, model.sh,
                            viewmats[c:c + 1], Ks[c:c + 1], W, H, sh_degree=model.sh_degree,
                            backgrounds=torch.full((3,), float(bg)))
        rgbs.append(out.colors[0].clamp(0, 1))
        depths.append((out.depths / out.alphas.clamp_min(1e-6))[0, ..., 0])
    return torch.stack(rgbs), torch.stack(depths)


def photometric_change(img: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Exposure gain (0.75–1.25), gamma (0.85–1.15) and sensor noise (σ 0.015) of a held-out
    query: img [H,W,3] in [0,1] -> [H,W,3] in [0,1]."""
    gain = 0.75 + 0.5 * float(torch.rand(1, generator=gen))
    gamma = 0.85 + 0.3 * float(torch.rand(1, generator=gen))
    noise = 0.015 * torch.randn(img.shape, generator=gen)
    return ((img * gain).clamp(0, 1) ** gamma + noise).clamp(0, 1)


def backproject(kp: np.ndarray, depth: np.ndarray, K: np.ndarray, viewmat: np.ndarray) -> np.ndarray:
    """World points [Q,3] of pixel positions kp [Q,2] (gsrender convention) at depth [H,W]
    (z-depth of the pixel containing each position)."""
    H, W = depth.shape
    x = np.clip(np.floor(kp[:, 0]).astype(int), 0, W - 1)
    y = np.clip(np.floor(kp[:, 1]).astype(int), 0, H - 1)
    centre, rays = pixel_rays(kp, K, viewmat)
    return centre + rays * depth[y, x, None]


def evaluate_queries(m: LiftedMap, query_feats: list, query_vm: torch.Tensor, query_K: torch.Tensor,
                     query_depth: torch.Tensor, tick=lambda: None, *,
                     ratio: float | None = DEFAULT_RATIO) -> dict:
    """Localizes every query (its cached (keypoints, descriptors)) against map m, matching with
    Lowe's ratio test (ratio None: mutual nearest neighbours alone). Returns lists over the
    queries: t_err (m), r_err (deg) — inf for a failure —, ms (matching + PnP), inliers, and over
    the inliers, against the ground-truth points of their keypoints at query_depth [Q,H,W]
    (nan without inliers): err3d (median 3-d distance), depth_err (median signed depth error of
    the map points, diagnostics.signed_depth_error), sibling / wrong_sibling (inliers whose point
    has a sibling from the same split Gaussian in the map / one nearer the true point; 0 for a
    map without parent ids), axial (the camera's signed displacement along its optical axis,
    nan for a failure). tick() after each query."""
    keys = ("t_err", "r_err", "ms", "inliers", "err3d", "depth_err", "sibling", "wrong_sibling",
            "axial")
    r = {k: [] for k in keys}
    H, W = query_depth.shape[1:]
    parents = None if m.parent_ids is None else m.parent_ids.numpy()
    for q, feats in enumerate(query_feats):
        K = query_K[q].double().numpy()
        res = localize(np.zeros((H, W, 3), np.uint8), K, m.points, m.descriptors,
                       lambda _im, f=feats: f, ratio=ratio)
        vm = query_vm[q].double().numpy()
        te, re = (LM.pose_errors(vm[:3, :3], vm[:3, 3], res.R, res.t) if res.success
                  else (math.inf, math.inf))
        r["t_err"].append(te), r["r_err"].append(re)
        r["axial"].append(D.axial_displacement(vm, res.R, res.t) if res.success else math.nan)
        r["ms"].append(res.timings_ms["matching"] + res.timings_ms["pnp"])
        r["inliers"].append(int(res.inliers.sum()))
        e3 = ed = math.nan
        sib = wrong = 0
        if res.inliers.any():
            mm = res.matches[res.inliers]
            gt = backproject(res.keypoints[mm[:, 0]], query_depth[q].numpy(), K, vm)
            pts = m.points[mm[:, 1]].double().numpy()
            e3 = float(np.median(np.linalg.norm(gt - pts, axis=1)))
            ed = float(np.median(D.signed_depth_error(pts, gt, vm)))
            if parents is not None:
                has, bad = D.wrong_sibling(m.points.double().numpy(), parents, mm[:, 1], gt)
                sib, wrong = int(has.sum()), int(bad.sum())
        r["err3d"].append(e3), r["depth_err"].append(ed)
        r["sibling"].append(sib), r["wrong_sibling"].append(wrong)
        tick()
    return r
