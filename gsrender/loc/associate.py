"""Which Gaussians a training keypoint's descriptor is lifted onto (docs/design.md §7 SplitGS-Loc
(3)). The candidates are the top-K contributors of the keypoint's pixel (composition weights w,
descending). Two rules:

- "ray_point" (default): one keypoint → one Gaussian. The keypoint's ray point is where the
  pixel's surface lies on its ray: the w-weighted mean, over the candidates, of the depth at
  which each candidate's density peaks along the ray. The Gaussian kept is the candidate most
  responsible there (largest o·exp(−½ Mahalanobis²) at the ray point), if its w ≥ τ_a. Of two
  sibling children of a split Gaussian it picks the one on the keypoint's side.
- "all": every candidate with w ≥ τ_a (one keypoint → up to K Gaussians). Siblings of a split
  Gaussian then receive near-duplicate descriptors, and a query match can land on either.
"""
from __future__ import annotations

import numpy as np
import torch

from gsrender.loc.rays import pixel_rays
from gsrender.reference import quat_to_rotmat
from gsrender.scene import GaussianModel

ASSOCIATIONS = ("ray_point", "all")
DEFAULT_ASSOCIATION = "ray_point"


def associate(model: GaussianModel, kps: np.ndarray, ids: torch.Tensor, ws: torch.Tensor, K,
              viewmat, *, tau_a: float, rule: str = DEFAULT_ASSOCIATION):
    """kps [P,2] keypoints of one view (gsrender pixel convention), ids [P,K] int64 / ws [P,K]
    their pixel's top-K contributors and weights (id −1 = none), K [3,3] and viewmat [4,4] the
    view's camera. -> (keypoint index [A], Gaussian id [A], weight [A]) of the associations."""
    if rule not in ASSOCIATIONS:
        raise ValueError(f"rule must be one of {ASSOCIATIONS}, got {rule!r}")
    valid = ids >= 0
    if rule == "all":
        p, k = (valid & (ws >= tau_a)).nonzero(as_tuple=True)
        return p, ids[p, k], ws[p, k]
    best = ray_point_choice(model, kps, ids, ws, K, viewmat)
    p = torch.arange(ids.shape[0])
    w = ws[p, best]
    ok = valid[p, best] & (w >= tau_a)
    return p[ok], ids[p, best][ok], w[ok]


def ray_point_choice(model: GaussianModel, kps: np.ndarray, ids: torch.Tensor, ws: torch.Tensor,
                     K, viewmat) -> torch.Tensor:
    """[P] int64: the column of ids of the candidate most responsible at each keypoint's ray
    point (module docstring); 0 for a keypoint without candidates."""
    P, Kc = ids.shape
    if P == 0:
        return torch.zeros(0, dtype=torch.int64)
    valid = ids >= 0
    g = ids.clamp_min(0).reshape(-1)
    centre, rays = pixel_rays(np.asarray(kps, np.float64), np.asarray(K, np.float64),
                              np.asarray(viewmat, np.float64))
    c = torch.from_numpy(centre)
    d = torch.from_numpy(rays)[:, None, :].expand(P, Kc, 3).reshape(-1, 3)  # [PK,3]
    R = quat_to_rotmat(model.quats[g].double())  # [PK,3,3]
    s = model.scales[g].double()
    # ray origin and direction in each candidate's whitened frame: u(t) = o + t·e, density ∝
    # exp(−½‖u‖²), which peaks along the ray at t = −o·e / e·e
    o = torch.einsum("nji,nj->ni", R, c[None] - model.means[g].double()) / s
    e = torch.einsum("nji,nj->ni", R, d) / s
    t_peak = (-(o * e).sum(1) / (e * e).sum(1).clamp_min(1e-30)).reshape(P, Kc)
    wv = torch.where(valid, ws.double(), 0.0)
    t_ray = (wv * t_peak).sum(1) / wv.sum(1).clamp_min(1e-12)  # [P]
    u = o.reshape(P, Kc, 3) + t_ray[:, None, None] * e.reshape(P, Kc, 3)
    # log o − ½‖u‖²: the log of the responsibility, which cannot underflow far from every mean
    log_resp = torch.log(model.opacities[g].double().reshape(P, Kc)) - 0.5 * (u * u).sum(2)
    return torch.where(valid, log_resp, -torch.inf).argmax(1)
