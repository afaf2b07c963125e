"""Composition-weight statistics of a Gaussian scene over posed views (the weight_stats op),
view by view so the per-pixel top-K arrays of one view at a time are held."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from gsrender import ops
from gsrender.scene import GaussianModel

# A Gaussian "dominates" a pixel when its composition weight there exceeds this. docs/design.md §7 says
# 0.5; on the benchmark's maps neighbouring surfels and split children overlap so much that
# w > 0.5 keeps only ~1 % of the Gaussians (too few to lift), while 0.2 keeps ~15–25 %.
DEFAULT_TAU_S = 0.2


@dataclass
class WeightStats:
    w_sum: torch.Tensor  # [N] Σw over every pixel of every view
    w_max: torch.Tensor  # [N]
    n_views: torch.Tensor  # [N] int32: views in which it dominates some pixel (w > tau_s)


def view_sizes(width, height, n_views: int) -> list[tuple[int, int]]:
    """Per-view (width, height): width/height are ints (every view) or sequences of n_views ints
    (cameras of different image sizes)."""
    ws = list(width) if hasattr(width, "__len__") else [width] * n_views
    hs = list(height) if hasattr(height, "__len__") else [height] * n_views
    if len(ws) != n_views or len(hs) != n_views:
        raise ValueError(f"width/height: need one per view ({n_views}), got {len(ws)} and {len(hs)}")
    out = [(int(w), int(h)) for w, h in zip(ws, hs)]
    if any(w <= 0 or h <= 0 for w, h in out):
        raise ValueError(f"width/height: must be positive, got {out}")
    return out


def view_contributors(model: GaussianModel, viewmats, Ks, width, height, *,
                      tau_s: float = DEFAULT_TAU_S, top_k: int = 4, tile_size: int = 16,
                      near_plane: float = 0.01) -> Iterator[tuple[int, WeightStats, torch.Tensor,
                                                                   torch.Tensor]]:
    """Yields, per view c: (c, its WeightStats, topk_ids [H,W,K] int32, topk_weights [H,W,K]).
    width/height: ints or one per view (view_sizes)."""
    dt = model.means.dtype
    for c, (w, h) in enumerate(view_sizes(width, height, viewmats.shape[0])):
        vm, K = viewmats[c:c + 1].to(dt).contiguous(), Ks[c:c + 1].to(dt).contiguous()
        radii, means2d, depths, conics, opac2d = ops.project(
            model.means.contiguous(), model.quats.contiguous(), model.scales.contiguous(),
            model.opacities.contiguous(), vm, K, w, h, 0.3, near_plane, 1e10, 0.0, False)
        offs, fids = ops.bin_tiles(means2d, radii, depths, w, h, tile_size, True, conics, opac2d)
        w_sum, w_max, n_views, ids, ws = ops.weight_stats(
            means2d, conics, opac2d, depths, offs, fids, w, h, tile_size, tau_s, top_k)
        yield c, WeightStats(w_sum, w_max, n_views), ids[0], ws[0]


def weight_stats(model: GaussianModel, viewmats, Ks, width, height, *,
                 tau_s: float = DEFAULT_TAU_S, tile_size: int = 16) -> WeightStats:
    """Σw, max w and dominance view counts of every Gaussian over all the views."""
    N = model.num_gaussians
    tot = WeightStats(model.means.new_zeros(N), model.means.new_zeros(N),
                      torch.zeros(N, dtype=torch.int32))
    for _, st, _, _ in view_contributors(model, viewmats, Ks, width, height, tau_s=tau_s,
                                         top_k=0, tile_size=tile_size):
        merge_stats(tot, st)
    return tot


def merge_stats(total: WeightStats, view: WeightStats) -> None:
    """Adds one view's statistics into total (in place)."""
    total.w_sum += view.w_sum
    torch.maximum(total.w_max, view.w_max, out=total.w_max)
    total.n_views += view.n_views
