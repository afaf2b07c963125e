"""Adam with one parameter group per 3DGS parameter, kept aligned when Gaussians come and go.

Densification replaces the parameter tensors (rows appended, removed or overwritten); the Adam
moments of every surviving row must follow its row, and new rows start with zero moments, as in
the original 3DGS code (cat_tensors_to_optimizer / _prune_optimizer / replace_tensor_to_optimizer).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gsrender.train.params import NAMES


@dataclass
class LearningRates:
    """3DGS defaults. means_* are multiplied by the scene extent (spatial_lr_scale)."""

    means_init: float = 1.6e-4
    means_final: float = 1.6e-6
    log_scales: float = 5e-3
    quats: float = 1e-3
    logit_opacities: float = 2.5e-2
    sh_dc: float = 2.5e-3
    sh_rest: float = 2.5e-3 / 20

    def scaled(self, factor: float) -> LearningRates:
        """Every rate times factor (short budgets converge faster with larger steps)."""
        return LearningRates(**{k: v * factor for k, v in vars(self).items()})


def make_optimizer(params: dict[str, torch.Tensor], lrs: LearningRates, extent: float) -> torch.optim.Adam:
    """Adam (eps 1e-15 as 3DGS) over params, which become leaf tensors requiring grad in place."""
    groups = []
    for name in NAMES:
        params[name] = params[name].detach().requires_grad_(True)
        lr = lrs.means_init * extent if name == "means" else getattr(lrs, name)
        groups.append({"params": [params[name]], "lr": lr, "name": name})
    return torch.optim.Adam(groups, lr=0.0, eps=1e-15)


def exp_decay(progress: float, init: float, final: float) -> float:
    """Log-linear interpolation from init (progress 0) to final (progress 1), as 3DGS's
    get_expon_lr_func without the delay phase."""
    t = min(max(progress, 0.0), 1.0)
    return math.exp((1 - t) * math.log(init) + t * math.log(final))


def set_means_lr(opt: torch.optim.Adam, lr: float) -> None:
    for g in opt.param_groups:
        if g["name"] == "means":
            g["lr"] = lr


def _swap(opt: torch.optim.Adam, params: dict, name: str, new: torch.Tensor, state_fn) -> None:
    """Replace group `name`'s tensor by `new` (a fresh leaf) and its Adam moments by
    state_fn(old moment)."""
    group = next(g for g in opt.param_groups if g["name"] == name)
    old = group["params"][0]
    new = new.detach().requires_grad_(True)
    st = opt.state.pop(old, None)
    if st:
        st["exp_avg"] = state_fn(st["exp_avg"])
        st["exp_avg_sq"] = state_fn(st["exp_avg_sq"])
        opt.state[new] = st
    group["params"][0] = new
    params[name] = new


def keep_rows(opt: torch.optim.Adam, params: dict, keep: torch.Tensor) -> None:
    """Keep only the Gaussians where keep [N] (bool) is True, moments included."""
    for name in NAMES:
        _swap(opt, params, name, params[name][keep], lambda s: s[keep])


def append_rows(opt: torch.optim.Adam, params: dict, new: dict[str, torch.Tensor]) -> None:
    """Append the rows of new[name] ([M, ...] each) to every parameter; their moments are zero."""
    for name in NAMES:
        rows = new[name].to(params[name])
        _swap(opt, params, name, torch.cat([params[name].detach(), rows]),
              lambda s, rows=rows: torch.cat([s, torch.zeros_like(rows)]))


def overwrite(opt: torch.optim.Adam, params: dict, name: str, values: torch.Tensor) -> None:
    """Replace one parameter's values (same shape) and zero its moments (opacity reset)."""
    _swap(opt, params, name, values, torch.zeros_like)
