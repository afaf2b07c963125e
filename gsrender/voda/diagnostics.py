"""Where a selection errs, Gaussian by Gaussian: which of the true set's Gaussians a baseline
misses (by contribution quartile over the training views, and whether they are hidden), and
how many of the Gaussians VODA adds to a baseline's selection it reached only past the
renderer's stop."""
from __future__ import annotations

import torch


def missed_profile(selected: torch.Tensor, truth: torch.Tensor, contribution: torch.Tensor,
                   hidden: torch.Tensor) -> dict:
    """selected, truth, hidden bool [N]; contribution [N] (Σ renderer weights over the training
    views). -> {"missed": count of truth ∖ selected, "missed_q1".."missed_q4": share of the
    missed Gaussians in each quartile of the true set's contribution (q1 lowest),
    "missed_hidden": share of the missed that are hidden} (shares 0 when nothing is missed)."""
    idx = torch.nonzero(truth, as_tuple=True)[0]
    order = idx[torch.argsort(contribution[idx], stable=True)]
    missed = ~selected
    n = int(missed[idx].sum())
    out = {"missed": n}
    for q, part in enumerate(torch.tensor_split(order, 4), 1):
        out[f"missed_q{q}"] = float(missed[part].sum()) / n if n else 0.0
    out["missed_hidden"] = float((missed & hidden)[idx].sum()) / n if n else 0.0
    return out


def added_past_stop(base: torch.Tensor, voda: torch.Tensor, members: dict) -> dict:
    """base, voda bool [N] selections of one object without and with VODA; members: train
    features' "members" ({"rendered", "past_stop"} bool [N]). -> {"added": count selected with
    VODA only, "added_past_stop": share of them VODA's target reached past the renderer's stop,
    "added_past_stop_only": share it reached only there (never as a contributor)}."""
    added = voda & ~base
    n = int(added.sum())
    past = members["past_stop"]
    only = past & ~members["rendered"]
    return {"added": n, "added_past_stop": float((added & past).sum()) / n if n else 0.0,
            "added_past_stop_only": float((added & only).sum()) / n if n else 0.0}
