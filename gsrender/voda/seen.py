"""Which held-out pixels show a surface that some training view saw: the removal error's mask
limited to what a method could have learnt about. Removing an object exposes what stood behind
it (the floor under it); where no training view saw that surface, even the true removal's
render there is a guess, and today's RDE counts its holes as error 1."""
from __future__ import annotations

import torch

from gsrender.voda.metrics import HOLE_ALPHA

SEEN_REL_TOL = 0.02  # a point is visible in a view when its depth is within 2 % of the view's


def backproject(depth: torch.Tensor, viewmat: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """World points [H,W,3] at view depth `depth` [H,W] through the pixel centres of a camera."""
    H, W = depth.shape
    y, x = torch.meshgrid(torch.arange(H, dtype=depth.dtype) + 0.5,
                          torch.arange(W, dtype=depth.dtype) + 0.5, indexing="ij")
    cam = torch.stack([(x - K[0, 2]) / K[0, 0] * depth, (y - K[1, 2]) / K[1, 1] * depth, depth], -1)
    R, t = viewmat[:3, :3], viewmat[:3, 3]
    return (cam - t) @ R  # Rᵀ(x − t), row vectors


def visible_in(points: torch.Tensor, viewmat: torch.Tensor, K: torch.Tensor, depth: torch.Tensor,
               alpha: torch.Tensor, rel_tol: float = SEEN_REL_TOL) -> torch.Tensor:
    """bool [...]: points [...,3] that project inside a view and lie on its rendered surface
    (depth [H,W], alpha [H,W]): within rel_tol of the depth there, where the view is opaque."""
    H, W = depth.shape
    cam = points @ viewmat[:3, :3].T + viewmat[:3, 3]
    z = cam[..., 2]
    front = z > 1e-6
    zc = torch.where(front, z, torch.ones_like(z))
    u = torch.floor(K[0, 0] * cam[..., 0] / zc + K[0, 2]).long()
    v = torch.floor(K[1, 1] * cam[..., 1] / zc + K[1, 2]).long()
    inside = front & (u >= 0) & (u < W) & (v >= 0) & (v < H)
    ui, vi = u.clamp(0, W - 1), v.clamp(0, H - 1)
    d, a = depth[vi, ui], alpha[vi, ui]
    return inside & (a >= HOLE_ALPHA) & ((z - d).abs() <= rel_tol * z)


def seen_surface(depth: torch.Tensor, alpha: torch.Tensor, viewmats, Ks, train_viewmats, train_Ks,
                 train_depth: torch.Tensor, train_alpha: torch.Tensor,
                 rel_tol: float = SEEN_REL_TOL) -> torch.Tensor:
    """bool [C,H,W]: held-out pixels (expected depth `depth`, `alpha` [C,H,W] of the scene to
    score against) whose surface point some training view (its rendered depth and alpha
    [V,H',W']) sees unoccluded."""
    seen = torch.zeros(depth.shape, dtype=torch.bool)
    for c in range(depth.shape[0]):
        pts = backproject(depth[c], viewmats[c], Ks[c])
        for v in range(train_viewmats.shape[0]):
            seen[c] |= visible_in(pts, train_viewmats[v], train_Ks[v], train_depth[v],
                                  train_alpha[v], rel_tol)
        seen[c] &= alpha[c] >= HOLE_ALPHA
    return seen
