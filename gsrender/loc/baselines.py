"""External map baselines for SplitGS-Loc, built from the same posed training views and features:

- depth back-projection: every training keypoint back-projected with the map's rendered expected
  depth (Σw·z / Σw), one map point per keypoint (no many-to-one association to Gaussians);
- triangulation (SfM-style, poses known): keypoints matched between neighbouring training views
  (mutual nearest neighbours + Lowe ratio), triangulated by DLT (cv2.triangulatePoints) and kept
  when both reprojections are within max_reproj_px, in front of both cameras and seen under a
  triangulation angle of at least min_angle_deg; one point per kept match.
Both return a LiftedMap so the same query code localizes against them."""
from __future__ import annotations

import math

import numpy as np
import torch

from gsrender.loc.features import Extractor, check_features
from gsrender.loc.lift import LiftedMap
from gsrender.loc.query import DEFAULT_RATIO, mutual_nn
from gsrender.loc.rays import pixel_rays
from gsrender.scene import GaussianModel

# Pixels whose rendered opacity is below this have no reliable expected depth: they are background.
DEFAULT_MIN_ALPHA = 0.5
DEFAULT_MAX_REPROJ_PX = 2.0
DEFAULT_MIN_ANGLE_DEG = 1.0
DEFAULT_NEIGHBOURS = 3


def _as_map(points: np.ndarray, desc: np.ndarray, n_obs: int) -> LiftedMap:
    d = torch.from_numpy(np.ascontiguousarray(desc, np.float32))
    d = torch.nn.functional.normalize(d, dim=1) if d.shape[0] else d
    M = points.shape[0]
    return LiftedMap(points=torch.from_numpy(np.ascontiguousarray(points, np.float32)),
                     descriptors=d, gaussian_ids=torch.full((M,), -1, dtype=torch.int64),
                     consistency=torch.ones(M), n_obs=torch.full((M,), n_obs, dtype=torch.int64))


def _features(images, extractor, n):
    return [check_features(*extractor(images[c]), f"images[{c}]") for c in range(n)]


def depth_backprojection_map(model: GaussianModel, viewmats, Ks, images, width: int, height: int,
                             extractor: Extractor, *, min_alpha: float = DEFAULT_MIN_ALPHA,
                             ) -> LiftedMap:
    """One map point per training keypoint at the rendered expected depth of its pixel."""
    import gsrender

    pts, descs = [], []
    for c, (kps, desc) in enumerate(_features(images, extractor, viewmats.shape[0])):
        with torch.no_grad():
            out = gsrender.rasterize(model.means, model.quats, model.scales, model.opacities,
                                     model.sh, viewmats[c:c + 1].to(model.means.dtype),
                                     Ks[c:c + 1].to(model.means.dtype), width, height,
                                     sh_degree=0)
        alpha = out.alphas[0, ..., 0].double().numpy()
        depth = out.depths[0, ..., 0].double().numpy() / np.maximum(alpha, 1e-9)
        px = np.clip(np.floor(kps[:, 0]).astype(np.int64), 0, width - 1)
        py = np.clip(np.floor(kps[:, 1]).astype(np.int64), 0, height - 1)
        ok = alpha[py, px] >= min_alpha
        centre, rays = pixel_rays(kps[ok], Ks[c].numpy(), viewmats[c].numpy())
        pts.append(centre + rays * depth[py[ok], px[ok], None])
        descs.append(desc[ok])
    return _as_map(np.concatenate(pts), np.concatenate(descs), 1)


def _ratio_mutual(d1: np.ndarray, d2: np.ndarray, ratio: float) -> np.ndarray:
    """Mutual nearest neighbours whose best/second-best distance ratio (in view 1) < ratio."""
    return mutual_nn(torch.from_numpy(d1), torch.from_numpy(d2), ratio=ratio).numpy()


def triangulated_map(viewmats, Ks, images, extractor: Extractor, *,
                     neighbours: int = DEFAULT_NEIGHBOURS, ratio: float = DEFAULT_RATIO,
                     max_reproj_px: float = DEFAULT_MAX_REPROJ_PX,
                     min_angle_deg: float = DEFAULT_MIN_ANGLE_DEG) -> LiftedMap:
    """Two-view triangulation of matched training keypoints between each view and its
    `neighbours` nearest views (by camera centre), with the known poses."""
    import cv2

    C = viewmats.shape[0]
    feats = _features(images, extractor, C)
    vm = viewmats.double().numpy()
    Kn = Ks.double().numpy()
    centres = np.stack([-v[:3, :3].T @ v[:3, 3] for v in vm])
    Pm = [Kn[c] @ vm[c, :3] for c in range(C)]  # keypoints and K share gsrender's convention
    pts, descs = [], []
    seen = set()
    for a in range(C):
        near = np.argsort(np.linalg.norm(centres - centres[a], axis=1))[1:neighbours + 1]
        for b in near:
            if (min(a, b), max(a, b)) in seen:
                continue
            seen.add((min(a, b), max(a, b)))
            (ka, da), (kb, db) = feats[a], feats[b]
            mt = _ratio_mutual(da, db, ratio)
            if len(mt) == 0:
                continue
            xa, xb = ka[mt[:, 0]].astype(np.float64), kb[mt[:, 1]].astype(np.float64)
            Xh = cv2.triangulatePoints(Pm[a], Pm[b], xa.T, xb.T)
            X = (Xh[:3] / np.where(np.abs(Xh[3:]) > 1e-12, Xh[3:], 1e-12)).T  # [Q,3]
            ok = np.ones(len(X), bool)
            for c, x in ((a, xa), (b, xb)):
                pc = X @ vm[c, :3, :3].T + vm[c, :3, 3]
                z = pc[:, 2]
                uv = pc[:, :2] / np.where(z[:, None] > 1e-9, z[:, None], 1e-9) * \
                    Kn[c, [0, 1], [0, 1]] + Kn[c, :2, 2]
                ok &= (z > 1e-6) & (np.linalg.norm(uv - x, axis=1) < max_reproj_px)
            ra, rb = X - centres[a], X - centres[b]
            cosang = (ra * rb).sum(1) / np.maximum(np.linalg.norm(ra, axis=1) *
                                                   np.linalg.norm(rb, axis=1), 1e-12)
            ok &= cosang < math.cos(math.radians(min_angle_deg))
            pts.append(X[ok])
            descs.append(da[mt[ok, 0]] + db[mt[ok, 1]])
    if not pts:
        return _as_map(np.zeros((0, 3)), np.zeros((0, feats[0][1].shape[1])), 2)
    return _as_map(np.concatenate(pts), np.concatenate(descs), 2)
