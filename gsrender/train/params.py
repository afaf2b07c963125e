"""Trainable 3DGS parameters: raw (pre-activation) tensors, initialisation and activation.

The optimiser works on what the original 3DGS code optimises: means, log-scales, quaternions
(wxyz, normalised inside the renderer), logit-opacities and SH coefficients split into the DC
term and the higher bands (they get different learning rates).
"""
from __future__ import annotations

import torch

from gsrender.scene import GaussianModel, rgb_to_sh

# The order of the optimiser's parameter groups.
NAMES = ("means", "log_scales", "quats", "logit_opacities", "sh_dc", "sh_rest")


def knn_scales(points: torch.Tensor, k: int = 3, chunk: int = 2048) -> torch.Tensor:
    """[P] sqrt of the mean squared distance to the k nearest other points (3DGS's distCUDA2
    initial scale). Computed in row chunks with torch.cdist so memory stays O(chunk·P)."""
    if points.dim() != 2 or points.shape[1] != 3:
        raise ValueError(f"points must have shape [P, 3], got {list(points.shape)}")
    P = points.shape[0]
    if P < 2:
        raise ValueError(f"points: need at least 2 points for nearest neighbours, got {P}")
    k = min(k, P - 1)
    pts = points.float()
    out = torch.empty(P, dtype=pts.dtype, device=pts.device)
    for s in range(0, P, chunk):
        d = torch.cdist(pts[s:s + chunk], pts)  # [chunk, P]
        # k+1 smallest: the first is the point itself (distance 0)
        near = d.topk(k + 1, dim=1, largest=False).values[:, 1:]  # [chunk, k]
        out[s:s + chunk] = near.square().mean(1).sqrt()
    return out


def _sh_rest(n: int, sh_degree: int, like: torch.Tensor) -> torch.Tensor:
    return like.new_zeros(n, (sh_degree + 1) ** 2 - 1, 3)  # [N, K-1, 3]


def params_from_points(xyz: torch.Tensor, rgb: torch.Tensor, sh_degree: int = 3,
                       init_opacity: float = 0.1) -> dict[str, torch.Tensor]:
    """3DGS initialisation from SfM points: xyz [P,3], rgb [P,3] in [0,1] (or uint8 0..255).
    Isotropic scales from the 3 nearest neighbours, identity rotations, opacity init_opacity,
    DC colour from rgb, higher SH bands zero."""
    if xyz.dim() != 2 or xyz.shape[1] != 3:
        raise ValueError(f"xyz must have shape [P, 3], got {list(xyz.shape)}")
    if rgb.shape != xyz.shape:
        raise ValueError(f"rgb must have shape {list(xyz.shape)} like xyz, got {list(rgb.shape)}")
    if not 0.0 < init_opacity < 1.0:
        raise ValueError(f"init_opacity must lie in (0, 1), got {init_opacity}")
    xyz = xyz.float()
    rgb = rgb.float() / 255.0 if rgb.dtype == torch.uint8 else rgb.float()
    n = xyz.shape[0]
    dist = knn_scales(xyz).clamp_min(1e-7)  # [P]
    quats = xyz.new_zeros(n, 4)
    quats[:, 0] = 1.0
    return {
        "means": xyz.clone(),
        "log_scales": dist.log()[:, None].repeat(1, 3),  # [P, 3]
        "quats": quats,
        "logit_opacities": torch.full((n,), float(torch.logit(torch.tensor(init_opacity))),
                                      device=xyz.device),
        "sh_dc": rgb_to_sh(rgb)[:, None, :],  # [P, 1, 3]
        "sh_rest": _sh_rest(n, sh_degree, xyz),
    }


def params_from_model(model: GaussianModel, sh_degree: int | None = None) -> dict[str, torch.Tensor]:
    """Raw parameters of a GaussianModel (logs / logits of its activated values); SH padded with
    zeros or truncated to sh_degree (default: the model's own degree)."""
    deg = model.sh_degree if sh_degree is None else sh_degree
    k = (deg + 1) ** 2
    sh = model.sh.float()
    if sh.shape[1] < k:
        sh = torch.cat([sh, sh.new_zeros(sh.shape[0], k - sh.shape[1], 3)], 1)
    eps = 1e-6
    return {
        "means": model.means.float().clone(),
        "log_scales": model.scales.float().clamp_min(1e-12).log(),
        "quats": model.quats.float().clone(),
        "logit_opacities": torch.logit(model.opacities.float().clamp(eps, 1 - eps)),
        "sh_dc": sh[:, :1].clone(),
        "sh_rest": sh[:, 1:k].clone(),
    }


def activated(params: dict[str, torch.Tensor]):
    """(means, quats, scales, opacities, sh [N,K,3]) as rasterize() takes them."""
    sh = torch.cat([params["sh_dc"], params["sh_rest"]], 1)  # [N, K, 3]
    return (params["means"], params["quats"], params["log_scales"].exp(),
            torch.sigmoid(params["logit_opacities"]), sh)


def to_model(params: dict[str, torch.Tensor]) -> GaussianModel:
    """A detached GaussianModel of the current parameters (e.g. for save_ply)."""
    with torch.no_grad():
        means, quats, scales, opac, sh = (t.detach().clone() for t in activated(params))
    # save_ply stores logits: keep opacities strictly inside (0, 1) in float32
    opac = opac.clamp(1e-7, 1 - 1e-7)
    return GaussianModel(means=means, quats=quats, scales=scales, opacities=opac, sh=sh)
