"""Per-pixel front-to-back contributors grouped into depth clusters (the `contributors` op), and
the per-cluster quantities VODA needs: member ranges, ΣW, depth range and F_c = Σwᵢfᵢ / Σwᵢ."""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from gsrender import ops

# docs/design.md §7 defaults: a new cluster when z_k − z_{k−1} > tau_rel·z_{k−1} + tau_abs
TAU_REL = 0.03
TAU_ABS = 0.0
K_MAX = 96


@dataclass
class Contributors:
    """The op's output for C cameras × P pixels × K entries (see csrc/ops/gsrender.cpp)."""

    ids: torch.Tensor       # [C, P, K] int32 Gaussian index, -1 past count
    weights: torch.Tensor   # [C, P, K] w = α·T
    zs: torch.Tensor        # [C, P, K] view depth of the mean
    clusters: torch.Tensor  # [C, P, K] int32 cluster index per pixel, -1 past count
    counts: torch.Tensor    # [C, P] int32 entries listed
    n_render: torch.Tensor  # [C, P] int32 entries the renderer composites
    alphas: torch.Tensor | None = None  # [C, P, K] α of each entry at its pixel (0 past count)

    @property
    def valid(self) -> torch.Tensor:  # [C, P, K] bool
        return self.ids >= 0

    @property
    def past_stop(self) -> torch.Tensor:  # [C, P, K] bool: listed after the renderer's stop
        k = torch.arange(self.ids.shape[-1], device=self.ids.device)
        return self.valid & (k >= self.n_render[..., None])

    @property
    def n_clusters(self) -> int:
        """Clusters per pixel, upper bound over pixels (the width of the per-cluster tensors)."""
        return int(self.clusters.max().item()) + 1 if self.clusters.numel() else 0


def depth_contributors(meta: dict, width: int, height: int, pixels=None, K_max: int = K_MAX,
                       tau_rel: float = TAU_REL, tau_abs: float = TAU_ABS,
                       tile_size: int = 16) -> Contributors:
    """Contributors of `pixels` (None, [C,P,2] int32 (x, y) or [C,H,W] bool) for a render's meta
    (gsrender.rasterize(...).meta, sorted mode, same tile_size)."""
    out = ops.contributors(meta["means2d"].detach(), meta["conics"].detach(),
                           meta["opacities"].detach(), meta["depths"].detach(),
                           meta["tile_offsets"], meta["flatten_ids"], width, height, tile_size,
                           pixels, K_max, tau_rel, tau_abs)
    c = Contributors(*out)
    return replace(c, alphas=entry_alphas(meta, c, width, pixels))


def entry_alphas(meta: dict, c: Contributors, width: int, pixels=None) -> torch.Tensor:
    """[C,P,K] α = min(0.99, o·exp(−σ)) of each listed entry at its pixel centre (the renderer's
    formula, csrc/include/gsrender/alpha.h; 0 past count). pixels as depth_contributors'."""
    C, P, K = c.ids.shape
    if pixels is None:
        p = torch.arange(P, device=c.ids.device)
        xy = torch.stack([p % width, p // width], -1).expand(C, P, 2)
    else:
        xy = ops.mask_to_pixels(pixels) if pixels.dtype == torch.bool else pixels
    valid = c.valid
    cam = torch.arange(C, device=c.ids.device).view(C, 1, 1).expand(C, P, K)[valid]
    gid = c.ids[valid].long()
    centre = xy.to(meta["means2d"].dtype)[:, :, None, :].expand(C, P, K, 2)[valid] + 0.5
    d = meta["means2d"].detach()[cam, gid] - centre  # [E, 2]
    a, b, cc = meta["conics"].detach()[cam, gid].unbind(-1)
    sigma = 0.5 * (a * d[:, 0] ** 2 + cc * d[:, 1] ** 2) + b * d[:, 0] * d[:, 1]
    alpha = (meta["opacities"].detach()[cam, gid] * torch.exp(-sigma)).clamp_max(0.99)
    out = torch.zeros(C, P, K, dtype=meta["means2d"].dtype, device=c.ids.device)
    out[valid] = alpha
    return out


def rendered_only(c: Contributors) -> Contributors:
    """The entries the renderer composites (before its stop, T < 1e-4), the others dropped as
    past count: membership limited to the Gaussians that contribute to the pixel."""
    past = c.past_stop
    drop = lambda t, fill: torch.where(past, torch.full_like(t, fill), t)
    return replace(c, ids=drop(c.ids, -1), weights=drop(c.weights, 0), zs=drop(c.zs, 0),
                   clusters=drop(c.clusters, -1), counts=c.n_render.clone(),
                   alphas=None if c.alphas is None else drop(c.alphas, 0))


def cluster_stats(c: Contributors) -> dict:
    """Per-cluster member range and mass, [C, P, Kc] each (Kc = c.n_clusters; absent clusters
    have count 0, wsum 0): start (first entry), count, wsum = ΣW, z_min, z_max."""
    C, P, K = c.ids.shape
    Kc = max(c.n_clusters, 1)
    cl = c.clusters.long().clamp_min(0)  # [C, P, K]; invalid entries masked by `valid` below
    valid = c.valid
    w = torch.where(valid, c.weights, torch.zeros_like(c.weights))
    count = torch.zeros(C, P, Kc, dtype=torch.int64, device=cl.device).scatter_add_(
        2, cl, valid.long())
    wsum = w.new_zeros(C, P, Kc).scatter_add_(2, cl, w)
    inf = torch.finfo(c.zs.dtype).max
    z_min = c.zs.new_full((C, P, Kc), inf).scatter_reduce_(
        2, cl, torch.where(valid, c.zs, torch.full_like(c.zs, inf)), "amin")
    z_max = c.zs.new_full((C, P, Kc), -inf).scatter_reduce_(
        2, cl, torch.where(valid, c.zs, torch.full_like(c.zs, -inf)), "amax")
    k_idx = torch.arange(K, device=cl.device).expand(C, P, K)
    start = torch.full((C, P, Kc), K, dtype=torch.int64, device=cl.device).scatter_reduce_(
        2, cl, torch.where(valid, k_idx, torch.full_like(k_idx, K)), "amin")
    present = count > 0
    return {"start": torch.where(present, start, torch.zeros_like(start)), "count": count,
            "wsum": wsum, "z_min": torch.where(present, z_min, torch.zeros_like(z_min)),
            "z_max": torch.where(present, z_max, torch.zeros_like(z_max))}


def cluster_features(c: Contributors, features: torch.Tensor, eps: float = 1e-12):
    """F_c = Σ_{i∈c} wᵢfᵢ / Σ_{i∈c} wᵢ for every cluster: features [N,D] (differentiable)
    -> (F [C,P,Kc,D], wsum [C,P,Kc])."""
    C, P, _ = c.ids.shape
    Kc = max(c.n_clusters, 1)
    D = features.shape[-1]
    valid = c.valid
    # only the listed entries: index_select / index_add (their backward is cheap on the CPU,
    # unlike advanced indexing's accumulate-put)
    slot = (torch.arange(C * P, device=valid.device).view(C, P, 1) * Kc + c.clusters.long())[valid]
    w = c.weights[valid].to(features.dtype)  # [E]
    f = features.index_select(0, c.ids[valid].long())  # [E, D]
    num = features.new_zeros(C * P * Kc, D).index_add(0, slot, w[:, None] * f)
    wsum = w.new_zeros(C * P * Kc).index_add(0, slot, w)
    return (num / (wsum[:, None] + eps)).view(C, P, Kc, D), wsum.view(C, P, Kc)
