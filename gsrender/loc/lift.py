"""Feature lifting (docs/design.md §7 SplitGS-Loc (3)): 2D descriptors of the posed training images
lifted onto Gaussians. A keypoint is associated with Gaussians among its pixel's top-K
contributors whose composition weight is at least tau_a (gsrender.loc.associate: by default the
one most responsible at the keypoint's ray point); each Gaussian's descriptor is the weighted
mean Σw·d / ‖Σw·d‖ of its associations, and ‖Σw·d‖ / Σw ∈ [0, 1] (1 = every view agrees) scores
its multi-view consistency: points below min_consistency are dropped."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gsrender.loc.associate import DEFAULT_ASSOCIATION, associate
from gsrender.loc.features import Extractor, check_features
from gsrender.loc.retrieval import pack_views
from gsrender.loc.stats import DEFAULT_TAU_S, WeightStats, merge_stats, view_contributors, view_sizes
from gsrender.scene import GaussianModel

# Chosen on the first synthetic room (studies/loc/synthetic.py, one 20 cm merge scale) and
# kept since: τ_a = 0.3 halves the map points of split maps without better poses; consistency
# 0.7 drops most well-localised points too.
DEFAULT_TAU_A = 0.2
DEFAULT_MIN_CONSISTENCY = 0.5


@dataclass
class LiftedMap:
    points: torch.Tensor  # [M,3] float32: the Gaussians' means
    descriptors: torch.Tensor  # [M,D] float32, L2-normalised
    gaussian_ids: torch.Tensor  # [M] int64 index into the lifted model
    consistency: torch.Tensor  # [M] ‖Σw·d‖/Σw
    n_obs: torch.Tensor  # [M] int64 associations
    # the unsplit Gaussian each point's Gaussian was split from (diagnostics: which points are
    # siblings); None when unknown (map files, maps not lifted from Gaussians)
    parent_ids: torch.Tensor | None = None
    # retrieval (optional): which training views observed each point (packed bits [M, ⌈C/8⌉]),
    # the views' global descriptors [C,G] and the codebook they were computed with
    point_views: np.ndarray | None = None
    view_descriptors: torch.Tensor | None = None
    codebook: torch.Tensor | None = None


def lift_features(model: GaussianModel, viewmats, Ks, images, width, height,
                  extractor: Extractor, *, tau_a: float = DEFAULT_TAU_A, top_k: int = 4,
                  tau_s: float = DEFAULT_TAU_S, stats_out: WeightStats | None = None,
                  features_out: list | None = None, association: str = DEFAULT_ASSOCIATION,
                  associations_out: dict | None = None):
    """Accumulates Σw·d, Σw and association counts per Gaussian over the views.

    images: [C,H,W,3] (uint8 or float in [0,1]) or a sequence of such arrays (or anything the
    extractor takes, indexed by view); width/height: ints or one per view. association: the
    keypoint-to-Gaussian rule (gsrender.loc.associate). When stats_out is given, the views'
    weight statistics are merged into it (one pass serves selection too); features_out (a list)
    receives each view's (keypoints, descriptors); associations_out (a dict) receives the counts
    "keypoints", "lifted_keypoints" (with at least one association) and "associations".
    Returns (gids [G] int64, sum_wd [G,D], sum_w [G], n_obs [G], pairs [Q,2]) for the Gaussians
    with at least one association; pairs: the unique (row into gids, view) observations."""
    if not 0 < tau_a <= 1:
        raise ValueError(f"tau_a must be in (0, 1], got {tau_a}")
    sizes = view_sizes(width, height, viewmats.shape[0])
    rows_g, rows_w, rows_d, rows_v = [], [], [], []
    counts = {"keypoints": 0, "lifted_keypoints": 0, "associations": 0}
    for c, st, ids, ws in view_contributors(model, viewmats, Ks, width, height, tau_s=tau_s,
                                            top_k=top_k):
        if stats_out is not None:
            merge_stats(stats_out, st)
        kps, desc = check_features(*extractor(images[c]), f"images[{c}]")
        if features_out is not None:
            features_out.append((kps, desc))
        counts["keypoints"] += kps.shape[0]
        if kps.shape[0] == 0:
            continue
        w_c, h_c = sizes[c]
        px = np.clip(np.floor(kps[:, 0]).astype(np.int64), 0, w_c - 1)
        py = np.clip(np.floor(kps[:, 1]).astype(np.int64), 0, h_c - 1)
        p_idx, g, w = associate(model, kps, ids[py, px].to(torch.int64), ws[py, px].float(),
                                Ks[c], viewmats[c], tau_a=tau_a, rule=association)
        counts["lifted_keypoints"] += int(torch.unique(p_idx).numel())
        counts["associations"] += int(p_idx.numel())
        rows_g.append(g)
        rows_w.append(w)
        rows_d.append(torch.from_numpy(desc)[p_idx])
        rows_v.append(torch.full((p_idx.numel(),), c, dtype=torch.int64))
    if associations_out is not None:
        associations_out.update(counts)
    D = rows_d[0].shape[1] if rows_d else 128
    if not rows_g or sum(r.numel() for r in rows_g) == 0:
        z = torch.zeros(0)
        return z.long(), torch.zeros(0, D), z, z.long(), torch.zeros(0, 2, dtype=torch.int64)
    g, w, d = torch.cat(rows_g), torch.cat(rows_w), torch.cat(rows_d)
    gids, inv = torch.unique(g, return_inverse=True)
    sum_wd = torch.zeros(gids.numel(), D).index_add_(0, inv, w[:, None] * d)
    sum_w = torch.zeros(gids.numel()).index_add_(0, inv, w)
    n_obs = torch.zeros(gids.numel(), dtype=torch.int64).index_add_(0, inv, torch.ones_like(inv))
    pairs = torch.unique(torch.stack([inv, torch.cat(rows_v)], 1), dim=0)
    return gids, sum_wd, sum_w, n_obs, pairs


def finalize_map(model: GaussianModel, gids, sum_wd, sum_w, n_obs, pairs=None, *, keep=None,
                 min_consistency: float = 0.0, min_obs: int = 1,
                 n_views: int | None = None, parent: torch.Tensor | None = None) -> LiftedMap:
    """Map points for the lifted Gaussians that are in keep (index tensor or None = all), have at
    least min_obs associations and a consistency ‖Σw·d‖/Σw ≥ min_consistency. With pairs and
    n_views, the map records which views observed each point (for retrieval); with parent (the
    split's [N] index into the unsplit model), each point's unsplit Gaussian."""
    norm = sum_wd.norm(dim=1)
    cons = norm / sum_w.clamp_min(1e-12)
    ok = (cons >= min_consistency) & (n_obs >= min_obs) & (norm > 0)
    if keep is not None:
        allowed = torch.zeros(model.num_gaussians, dtype=torch.bool)
        allowed[keep] = True
        ok &= allowed[gids]
    point_views = None
    if pairs is not None and n_views is not None:
        row = torch.full((gids.numel(),), -1, dtype=torch.int64)
        row[ok] = torch.arange(int(ok.sum()))
        pv = pairs[row[pairs[:, 0]] >= 0]
        point_views = pack_views(row[pv[:, 0]], pv[:, 1], int(ok.sum()), n_views)
    return LiftedMap(points=model.means[gids[ok]].float(),
                     descriptors=(sum_wd[ok] / norm[ok, None]).float(), gaussian_ids=gids[ok],
                     consistency=cons[ok].float(), n_obs=n_obs[ok], point_views=point_views,
                     parent_ids=None if parent is None else parent[gids[ok]])
