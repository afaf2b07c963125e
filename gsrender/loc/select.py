"""Multi-view selection (docs/design.md §7 SplitGS-Loc (2)): keep the Gaussians that dominate some pixel
(w > tau_s) in at least n_views views; optionally cap the count with spatial suppression."""
from __future__ import annotations

import torch

from gsrender.loc.stats import WeightStats

# A Gaussian that wins pixels in a single view only is usually a floater or a view-dependent
# artefact; two views already give it a triangulation-like baseline.
DEFAULT_MIN_VIEWS = 2


def select_gaussians(stats: WeightStats, means: torch.Tensor, *, min_views: int = DEFAULT_MIN_VIEWS,
                     budget: int | None = None, suppression_radius: float | None = None) -> torch.Tensor:
    """Indices (int64, by descending Σw) of the kept Gaussians.

    min_views: dominance in at least this many views. budget: keep at most this many; with
    suppression_radius r, first keep only the strongest Gaussian (by Σw) per cell of a grid of
    side r so the budget spreads over the scene instead of piling onto textured spots.
    """
    if isinstance(min_views, bool) or not isinstance(min_views, int) or min_views < 0:
        raise ValueError(f"min_views must be an int >= 0, got {min_views!r}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise ValueError(f"budget must be a positive int or None, got {budget!r}")
    if suppression_radius is not None and not suppression_radius > 0:
        raise ValueError(f"suppression_radius must be > 0 or None, got {suppression_radius!r}")
    idx = (stats.n_views >= min_views).nonzero().squeeze(1)
    idx = idx[torch.argsort(stats.w_sum[idx], descending=True, stable=True)]
    if suppression_radius is not None and idx.numel():
        cells = torch.floor(means[idx] / suppression_radius).to(torch.int64)  # [S,3]
        _, inv = torch.unique(cells, dim=0, return_inverse=True)
        # first (strongest) member of each cell: the minimum position among equal cells
        first = torch.full((int(inv.max()) + 1,), idx.numel(), dtype=torch.int64)
        first.scatter_reduce_(0, inv, torch.arange(idx.numel()), reduce="amin")
        idx = idx[torch.sort(first).values]
    if budget is not None:
        idx = idx[:budget]
    return idx
