"""One rank of tests/train/test_distributed.py's training-equivalence check (run_rank, started by
torch.multiprocessing.spawn), and the runs both sides make:
a DistributedTrainer with batch_views = 1 on each of 2 ranks must take the steps of one Trainer
with batch_views = 2, densification included. Saves, per run, this rank's first-step gradients,
its parameters, Gaussian ids and densification statistics after the run, and the densification
events to OUT/rank{R}.pt."""
from __future__ import annotations

import dataclasses

import torch

from gsrender.train import TrainConfig, Trainer, synthetic_dataset
from gsrender.train.densify import DensifyConfig
from gsrender.train.optim import LearningRates
from gsrender.train.params import NAMES

LEARNING_RATES = LearningRates().scaled(2.0)
CAP = 760  # Gaussians: the scene starts with 661 points
PERCENT_DENSE = 0.03  # of the extent: most initial Gaussians are small enough to clone
STEPS = 3  # optimiser steps of the "plain" run
RUNS = {
    # no densification: the parameters must follow the one process's step for step
    "plain": {"steps": STEPS * 2, "densify_from": 1.0},
    # 8 steps of 2 views, densifying every 2 steps (events at steps 2, 4, 6), an opacity reset
    # at step 4 (then pruning of large Gaussians too) and a cap that binds: the clones, splits
    # (their noise), prunes and the capped choice must be those of one process. Rotations are
    # held (quaternion lr 0): a split child's mean is its parent's plus R·(s ⊙ noise), and the
    # rotation of a near-isotropic parent is free — rounding-noise gradients that Adam turns
    # into ±lr steps either way by the CPU copy in use — so it would move the children by up to
    # θ·|s ⊙ noise| (seen on the baseline copy: 3.2e-3, 60 means-lr steps); the plain run
    # checks the rotations (as covariances)
    "densify": {"steps": 16, "densify_from": 0.0, "densify_until": 1.0, "densify_every": 4,
                "opacity_reset_every": 8,
                "densify": DensifyConfig(grad_threshold=2e-5, percent_dense=PERCENT_DENSE,
                                         max_gaussians=CAP),
                "lrs": dataclasses.replace(LEARNING_RATES, quats=0.0)},
}


def data():
    """The synthetic scene's 600 points plus 61 repeated ones (as SfM points repeat: snowmiku has
    572), each in the other shard than its twin: equal depths whose render order must be one
    process's."""
    d = synthetic_dataset(600, 9, 48, 36, every=8, seed=3)
    xyz, rgb = d.points
    d.points = (torch.cat([xyz, xyz[1:62]]), torch.cat([rgb, rgb[1:62]]))
    return d


def config(run: str, batch_views: int) -> TrainConfig:
    return TrainConfig(**{"sh_degree": 1, "background": "random", "seed": 5,
                          "lrs": LEARNING_RATES, "batch_views": batch_views, **RUNS[run]})


def train(trainer: Trainer, views) -> dict:
    trainer.train_step(views)
    grads = {k: trainer.params[k].grad.clone() for k in NAMES}
    while not trainer.done():
        trainer.train_step(views)
    return {"grads": grads, "params": {k: trainer.params[k].detach().clone() for k in NAMES},
            "accum": trainer.stats.accum.clone(), "denom": trainer.stats.denom.clone(),
            "ids": trainer.ids.clone(), "log": trainer.log, "steps": trainer.step_count,
            "lrs": {g["name"]: g["lr"] for g in trainer.opt.param_groups}}


def run_rank(rank: int, world: int, port: int, path: str) -> None:
    """torch.multiprocessing.spawn's entry: rank `rank` of `world` gloo processes on loopback
    saves its runs' results to path/rank{rank}.pt."""
    import datetime

    import torch.distributed as dist

    from gsrender.train.distributed import DistributedTrainer

    torch.set_num_threads(1)  # one core a rank (CI has 2)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    try:
        d = data()
        res = {run: train(DistributedTrainer.from_points(*d.points, d.extent, config(run, 1)),
                          d.train) for run in RUNS}
        torch.save(res, f"{path}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()
