"""One rank of tests/test_distributed.py's training-equivalence check (run as
`python distributed_train_case.py OUT` under an env:// rendezvous), and the runs both sides make:
a DistributedTrainer with batch_views = 1 on each of 2 ranks must take the steps of one Trainer
with batch_views = 2. Saves, per run, this rank's first-step gradients, its parameters and
densification statistics after the run, and the densification events to OUT/rank{R}.pt."""
from __future__ import annotations

import sys

import torch

from gsrender.train import TrainConfig, Trainer, synthetic_dataset
from gsrender.train.densify import DensifyConfig
from gsrender.train.optim import LearningRates
from gsrender.train.params import NAMES

STEPS = 3  # optimiser steps
RUNS = {
    # no densification: the parameters must follow the one process's step for step
    "plain": {"densify_from": 1.0},
    # densification after the 2nd step (densify_every 4 views = 2 steps of 2): its counts must
    # agree (a clone or split depends on the averaged statistics; the split positions are each
    # process's own random draws, so the runs part after it)
    "densify": {"densify_from": 0.0, "densify_every": 4,
                "densify": DensifyConfig(grad_threshold=2e-5)},
}


def data():
    return synthetic_dataset(600, 9, 48, 36, every=8, seed=3)


def config(run: str, batch_views: int) -> TrainConfig:
    return TrainConfig(steps=STEPS * 2, sh_degree=1, background="random", seed=5,
                       lrs=LearningRates().scaled(2.0), batch_views=batch_views, **RUNS[run])


def train(trainer: Trainer, views) -> dict:
    trainer.train_step(views)
    grads = {k: trainer.params[k].grad.clone() for k in NAMES}
    while not trainer.done():
        trainer.train_step(views)
    return {"grads": grads, "params": {k: trainer.params[k].detach().clone() for k in NAMES},
            "accum": trainer.stats.accum.clone(), "denom": trainer.stats.denom.clone(),
            "log": trainer.log, "steps": trainer.step_count}


def main(path: str) -> None:
    import torch.distributed as dist

    from gsrender.train.distributed import DistributedTrainer

    dist.init_process_group("gloo")
    d = data()
    res = {run: train(DistributedTrainer.from_points(*d.points, d.extent, config(run, 1)), d.train)
           for run in RUNS}
    torch.save(res, f"{path}/rank{dist.get_rank()}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
