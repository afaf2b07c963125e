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


ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-15  # 3DGS


def batch_scaling(views_per_step: int) -> tuple[float, tuple[float, float], float]:
    """(learning-rate factor, Adam betas, Adam eps) for a mean gradient over views_per_step views,
    as gsplat's simple_trainer sets them for batch_size × world_size: Adam's square-root scaling
    rule (Malladi et al. 2022): lr × √V, 1 − β × V, eps / √V. β is floored at 0 (V ≥ 10 would
    make β₁ negative, which gsplat leaves open). V = 1 gives the 3DGS values."""
    if views_per_step < 1:
        raise ValueError(f"views_per_step must be >= 1, got {views_per_step}")
    root = math.sqrt(views_per_step)
    betas = tuple(max(0.0, 1 - views_per_step * (1 - b)) for b in ADAM_BETAS)
    return root, betas, ADAM_EPS / root


def make_optimizer(params: dict[str, torch.Tensor], lrs: LearningRates, extent: float,
                   views_per_step: int = 1, fused: bool = False) -> torch.optim.Adam:
    """Adam over params, which become leaf tensors requiring grad in place; lrs are the rates
    before batch_scaling(views_per_step), which this applies (set_means_lr takes scaled rates).
    fused: torch's fused Adam (see below: for one process only)."""
    factor, betas, eps = batch_scaling(views_per_step)
    groups = []
    for name in NAMES:
        params[name] = params[name].detach().requires_grad_(True)
        lr = lrs.means_init * extent if name == "means" else getattr(lrs, name)
        groups.append({"params": [params[name]], "lr": lr * factor, "name": name})
    # fused=True is ~4x faster on the CPU (benchmarks/train_step.py), but its rounding depends on
    # an element's position in the tensor (vector body or tail), so shards would not train
    # exactly as one process (test_two_ranks_densify_like_one_process_with_a_batch_of_two): the
    # default stays foreach, the distributed trainer never fuses
    return torch.optim.Adam(groups, lr=0.0, betas=betas, eps=eps, fused=fused or None)


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
