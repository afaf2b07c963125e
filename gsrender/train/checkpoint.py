"""Training checkpoints: everything a run needs to go on after a stop, written atomically.

A checkpoint holds the raw parameters, Adam's state, the Gaussians' persistent ids, the
densification statistics since the last densification, the background generator's state, the
epoch's remaining view order, the step and time counters, the densification log and the
command's own state (its arguments and history). Resuming from it continues the exact run: the
view order and the split noise are functions of (seed, step) and (seed, Gaussian id), so in the
deterministic mode (the rasterizer's fixed-order gradient sums) a resumed run equals the
uninterrupted one bit for bit on the same machine and thread count.
"""
from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import torch

from gsrender.io.atomic import atomic_path
from gsrender.train import densify as dens

FOLDER = "checkpoints"
_NAME_RE = re.compile(r"^step_(\d+)\.pt$")
# checkpoints kept besides the newest: one older in case the newest is from a bad moment
KEEP = 2


def path_for(out: Path, step: int) -> Path:
    return Path(out) / FOLDER / f"step_{step:07d}.pt"


def latest(out: str | os.PathLike) -> Path | None:
    """The newest checkpoint under out/checkpoints, or None."""
    folder = Path(out) / FOLDER
    if not folder.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME_RE.match(p.name))]
    return max(found)[1] if found else None


def trainer_state(trainer) -> dict:
    st = trainer.stats
    return {
        "params": {k: v.detach().clone() for k, v in trainer.params.items()},
        "optimizer": trainer.opt.state_dict(),
        "ids": trainer.ids.clone(),
        "grad_stats": {"accum": st.accum.clone(), "denom": st.denom.clone(),
                       "max_radii": st.max_radii.clone()},
        "bg_gen": trainer.bg_gen.get_state(),
        "view_order": list(trainer._order),
        "step": trainer.step_count,
        "train_seconds": trainer.train_seconds,
        "phase_seconds": dict(trainer.phase_seconds),
        "log": list(trainer.log),
    }


def restore(trainer, state: dict) -> None:
    """Put a checkpoint's state into a trainer built with the same configuration."""
    params = {k: v.to(trainer.device) for k, v in state["params"].items()}
    # the optimiser refers to its parameters by position: rebuild it over the loaded tensors
    from gsrender.train import optim

    trainer.params = params
    trainer.opt = optim.make_optimizer(trainer.params, trainer.cfg.lrs, trainer.extent,
                                       trainer.views_per_step, fused=trainer.opt.defaults.get("fused") is True)
    trainer.opt.load_state_dict(state["optimizer"])
    trainer.ids = state["ids"].to(trainer.device)
    g = state["grad_stats"]
    trainer.stats = dens.GradStats(trainer.num_gaussians, trainer.device)
    trainer.stats.accum, trainer.stats.denom, trainer.stats.max_radii = (
        g["accum"].to(trainer.device), g["denom"].to(trainer.device), g["max_radii"].to(trainer.device))
    trainer.bg_gen.set_state(state["bg_gen"])
    trainer._order = list(state["view_order"])
    trainer.step_count = int(state["step"])
    trainer.train_seconds = float(state["train_seconds"])
    trainer.phase_seconds.update(state["phase_seconds"])
    trainer.log = list(state["log"])


def save(out: Path, trainer, extra: dict) -> Path:
    """out/checkpoints/step_N.pt (atomically), then older ones beyond KEEP removed."""
    path = path_for(out, trainer.step_count)
    with atomic_path(path) as tmp:
        torch.save({"trainer": trainer_state(trainer), **extra}, tmp)
    folder = path.parent
    old = sorted(p for p in folder.iterdir() if _NAME_RE.match(p.name))[:-KEEP]
    for p in old:
        p.unlink()
    return path


def load(path: str | os.PathLike) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as e:
        raise ValueError(f"resume: cannot read checkpoint {path} ({e})") from None
