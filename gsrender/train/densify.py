"""Adaptive density control as in 3DGS: gradient statistics, clone / split, prune, opacity reset.

The statistic is the norm of the screen-space gradient of each Gaussian's projected mean
(meta["means2d"]), averaged over the views in which it was visible. Like gsplat, the pixel-space
gradient is scaled by (W/2, H/2) so it is the NDC gradient the original code thresholds at 2e-4.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gsrender.synthetic import quat_to_rotmat
from gsrender.train import optim
from gsrender.train.noise import child_ids
from gsrender.train.noise import normal as noise_of
from gsrender.train.params import NAMES

SPLIT_CHILDREN = 2
SPLIT_SHRINK = 0.8 * SPLIT_CHILDREN  # children get scale / 1.6


@dataclass
class DensifyConfig:
    grad_threshold: float = 2e-4  # mean NDC gradient norm that marks under-reconstruction
    percent_dense: float = 0.01  # clone when max scale <= this · extent, else split
    min_opacity: float = 0.005  # prune below
    # pixels; prune Gaussians whose screen radius exceeded this since the last densification
    # (after the first opacity reset). None: never. The original code names 20 px, but its
    # densification_postfix zeroes max_radii2D before the prune reads it, so it never prunes on
    # screen size; gsplat's default (refine_scale2d_stop_iter = 0) is off too. Turned on, it
    # removes every large background Gaussian a close-up view sees, every 100 steps: on the real
    # bonsai at 7000 steps it cost several dB held-out (docs/training.md).
    max_screen_radius: float | None = None
    max_world_scale: float = 0.1  # · extent; prune larger (after the first opacity reset)
    max_gaussians: int = 150_000  # growth stops at this count (CPU speed)
    reset_opacity: float = 0.01  # opacity reset clamps every opacity to at most this


class GradStats:
    """Per-Gaussian running sums since the last densification."""

    def __init__(self, n: int, device: torch.device):
        self.accum = torch.zeros(n, device=device)  # [N] Σ ‖∇ means2d‖ (NDC)
        self.denom = torch.zeros(n, device=device)  # [N] views in which visible
        self.max_radii = torch.zeros(n, device=device)  # [N] largest screen radius (pixels)

    def update(self, v_means2d: torch.Tensor, radii: torch.Tensor, width: int, height: int) -> None:
        """v_means2d [C,N,2] gradient of the loss w.r.t. meta["means2d"], radii [C,N,2]."""
        C = v_means2d.shape[0]
        # the loss averages over the C views: undo it so the statistic does not depend on C
        scale = v_means2d.new_tensor([0.5 * width * C, 0.5 * height * C])
        norm = (v_means2d * scale).norm(dim=-1)  # [C, N]
        vis = (radii > 0).any(-1)  # [C, N]
        self.accum += (norm * vis).sum(0)
        self.denom += vis.sum(0)
        self.max_radii = torch.maximum(self.max_radii, radii.amax(dim=(0, 2)).to(self.max_radii))

    def mean_grad(self) -> torch.Tensor:
        return self.accum / self.denom.clamp_min(1)  # [N]


def _split_rows(params: dict, idx: torch.Tensor, ids: torch.Tensor, seed: int) -> dict:
    """SPLIT_CHILDREN children per Gaussian idx: means sampled from N(mean, Σ) of the Gaussian
    itself, scales / 1.6, everything else copied. ids: the children's ids [M] (noise keys)."""
    rep = {k: params[k].detach()[idx].repeat_interleave(SPLIT_CHILDREN, 0) for k in NAMES}
    scales = rep["log_scales"].exp()  # [M, 3]
    noise = noise_of(ids, seed, 3).to(scales) * scales
    R = quat_to_rotmat(rep["quats"])  # [M, 3, 3]
    rep["means"] = rep["means"] + (R @ noise[..., None])[..., 0]
    rep["log_scales"] = (scales / SPLIT_SHRINK).log()
    return rep


def _local(t: torch.Tensor) -> torch.Tensor:
    return t


def _top_candidates(grads: torch.Tensor, ids: torch.Tensor, room: int, gather) -> torch.Tensor:
    """[K] bool: which of this shard's K candidates (mean gradients grads, ids ids) are among
    the `room` largest gradients of all shards' candidates (ties: smaller id first), so that the
    choice does not depend on how the Gaussians are sharded or ordered."""
    all_g, all_ids = gather(grads), gather(ids)
    order = all_ids.argsort(stable=True)
    order = order[all_g[order].argsort(descending=True, stable=True)]
    return torch.isin(ids, all_ids[order[:room]])


def _appended_order(order: torch.Tensor, clone_idx: torch.Tensor, split_idx: torch.Tensor,
                    gather) -> torch.Tensor:
    """Order keys of the rows densify_and_prune appends: after every key of every shard, all
    shards' clones by their parents' keys, then all split children by their parents' keys (two
    consecutive keys a parent): the position one process appends them at."""
    top = order.max(0, keepdim=True).values if order.numel() else order.new_full((1,), -1)
    base = int(gather(top).max()) + 1
    clones, splits = gather(order[clone_idx]).sort().values, gather(order[split_idx]).sort().values
    clone_keys = base + torch.searchsorted(clones, order[clone_idx])
    first = base + clones.numel() + SPLIT_CHILDREN * torch.searchsorted(splits, order[split_idx])
    split_keys = first[:, None] + torch.arange(SPLIT_CHILDREN, device=order.device)
    return torch.cat([clone_keys, split_keys.flatten()])


def densify_and_prune(params: dict, opt: torch.optim.Adam, stats: GradStats, cfg: DensifyConfig,
                      extent: float, prune_large: bool, ids: torch.Tensor, seed: int = 0,
                      event: int = 0, gather=_local, order: torch.Tensor | None = None
                      ) -> tuple[dict[str, int], torch.Tensor, torch.Tensor | None]:
    """Clone small and split large Gaussians whose mean gradient exceeds the threshold (at most
    cfg.max_gaussians in total, largest gradients first), then prune transparent ones (and, when
    prune_large, ones too big on screen or in the world). ids [N] int64: the Gaussians' persistent
    ids; clones and split children get ids from (parent id, event), split noise comes from
    (seed, child id) (train.noise). gather(t) concatenates t over all shards (collective; the
    default: one process holds all Gaussians): the cap counts all shards. order [N] int64 (a
    shard's): the Gaussians' positions in one process's list (the renderer's tie-break at equal
    depths), kept up to date when given. Returns the counts (this shard's), the ids and the
    order keys (None when not given) of the Gaussians after the call."""
    with torch.no_grad():
        n = params["means"].shape[0]
        grads = stats.mean_grad()
        max_scale = params["log_scales"].exp().amax(-1)  # [N]
        cand = (grads >= cfg.grad_threshold).nonzero().squeeze(1)
        counts = gather(torch.tensor([[n, cand.numel()]], device=grads.device)).sum(0)
        n_all, n_cand = (int(v) for v in counts)  # all shards' Gaussians and candidates
        room = max(cfg.max_gaussians - n_all, 0)  # each clone or split adds one Gaussian net
        if n_cand > room:
            cand = cand[_top_candidates(grads[cand], ids[cand], room, gather)]
        small = max_scale[cand] <= cfg.percent_dense * extent
        clone_idx, split_idx = cand[small], cand[~small]
        new = {k: params[k].detach()[clone_idx] for k in NAMES}
        split_ids = torch.stack([child_ids(ids[split_idx], event, 1 + c)
                                 for c in range(SPLIT_CHILDREN)], 1).flatten()  # repeat_interleave order
        children = _split_rows(params, split_idx, split_ids, seed)
        optim.append_rows(opt, params, {k: torch.cat([new[k], children[k]]) for k in NAMES})
        ids = torch.cat([ids, child_ids(ids[clone_idx], event, 0), split_ids])
        if order is not None:
            order = torch.cat([order, _appended_order(order, clone_idx, split_idx, gather)])
        n_new = clone_idx.numel() + children["means"].shape[0]
        parent = torch.zeros(n + n_new, dtype=torch.bool, device=grads.device)
        parent[split_idx] = True
        transparent = (torch.sigmoid(params["logit_opacities"]) < cfg.min_opacity) & ~parent
        drop = parent | transparent
        large = torch.zeros_like(drop)
        if prune_large:
            large = params["log_scales"].exp().amax(-1) > cfg.max_world_scale * extent
            if cfg.max_screen_radius is not None:
                radii = torch.cat([stats.max_radii, stats.max_radii.new_zeros(n_new)])
                large |= radii > cfg.max_screen_radius
            large &= ~drop
            drop |= large
        optim.keep_rows(opt, params, ~drop)
    return {"cloned": int(clone_idx.numel()), "split": int(split_idx.numel()),
            "pruned_transparent": int(transparent.sum()), "pruned_large": int(large.sum()),
            "total": int(params["means"].shape[0])}, ids[~drop], None if order is None else order[~drop]


def reset_opacity(params: dict, opt: torch.optim.Adam, value: float) -> None:
    """Clamp every opacity to at most `value` (moments zeroed), so that Gaussians which stay
    useless fall below min_opacity and get pruned."""
    with torch.no_grad():
        cap = torch.logit(torch.tensor(value)).item()
        optim.overwrite(opt, params, "logit_opacities", params["logit_opacities"].clamp_max(cap))
