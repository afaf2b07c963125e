"""Batches of views in the trainer: the rule that converts step counts (given in views) to
optimiser steps, gsplat's learning-rate / Adam scaling for a batch, the batch sampler, and the
command's --batch-views / --steps-scaler (the 2-rank equivalence: tests/train/test_distributed.py)."""
from __future__ import annotations

import json
import math

import pytest

from gsrender.train import TrainConfig, Trainer, synthetic_dataset
from gsrender.train.optim import batch_scaling
from gsrender.train.run import main as train_main
from gsrender.train.schedule import Schedule, scaled_count


def _data():
    return synthetic_dataset(n_gaussians=300, n_views=9, width=32, height=24, n_points=200, seed=1)


def test_step_counts_scale_like_gsplats_adjust_steps():
    # 2 views a step (2 ranks, or --batch-views 2): half the optimiser steps for every count
    s = Schedule.of(200, 100, 3000, steps_scaler=1.0, views_per_step=2)
    assert (s.steps, s.densify_every, s.opacity_reset_every) == (100, 50, 1500)
    assert s.count(250) == 125
    # gsplat's own example: 4 GPUs, --steps_scaler 0.25 (here at one view a process a step)
    s = Schedule.of(30000, 100, 3000, steps_scaler=0.25, views_per_step=1)
    assert (s.steps, s.densify_every, s.opacity_reset_every) == (7500, 25, 750)
    # both factors multiply
    assert Schedule.of(200, 100, 0, steps_scaler=0.5, views_per_step=2).steps == 50
    # no budget / never stay so; a positive count never rounds to 0 steps
    assert scaled_count(None, 0.5) is None and scaled_count(0, 0.5) == 0
    assert scaled_count(3, 0.1) == 1 and scaled_count(7, 0.5) == 4


def test_batch_scaling_is_gsplats_square_root_rule():
    assert batch_scaling(1) == (1.0, (0.9, 0.999), 1e-15)  # 3DGS's Adam
    lr, betas, eps = batch_scaling(2)
    assert lr == pytest.approx(math.sqrt(2)) and eps == pytest.approx(1e-15 / math.sqrt(2))
    assert betas == pytest.approx((0.8, 0.998))
    assert batch_scaling(12)[1][0] == 0.0  # floored, not negative
    with pytest.raises(ValueError, match="views_per_step"):
        batch_scaling(0)


def test_trainer_with_a_batch_runs_fewer_larger_steps():
    data = _data()
    one = Trainer.from_points(*data.points, data.extent, TrainConfig(steps=40))
    two = Trainer.from_points(*data.points, data.extent, TrainConfig(steps=40, batch_views=2))
    assert (one.sched.steps, two.sched.steps, two.views_per_step) == (40, 20, 2)
    for g1, g2 in zip(one.opt.param_groups, two.opt.param_groups):
        assert g2["lr"] == pytest.approx(g1["lr"] * math.sqrt(2))
        assert g2["betas"] == pytest.approx((0.8, 0.998))
    r = two.train_step(data.train)
    assert two.step_count == 1 and two.progress() == pytest.approx(1 / 20)
    assert r["n"] == two.num_gaussians


def test_batches_take_every_view_once_an_epoch():
    data = _data()
    tr = Trainer.from_points(*data.points, data.extent, TrainConfig(steps=10, batch_views=2))
    n = len(data.train)
    assert n == 7
    seen = []
    for _ in range(7):  # 14 views: two epochs of 7
        seen += [v.name for v in tr._next_views(data.train)]
        tr.step_count += 1
    assert sorted(seen[:7]) == sorted(seen[7:]) == sorted(v.name for v in data.train)
    big = Trainer.from_points(*data.points, data.extent, TrainConfig(steps=10, batch_views=8))
    with pytest.raises(ValueError, match="8 views a step: more than the 7 training views"):
        big.train_step(data.train)


def test_bad_batch_arguments():
    with pytest.raises(ValueError, match="batch_views"):
        TrainConfig(batch_views=0)
    with pytest.raises(ValueError, match="steps_scaler"):
        TrainConfig(steps_scaler=0.0)
    with pytest.raises(SystemExit, match="--steps-scaler"):
        train_main(["--synthetic", "--steps-scaler", "-1"])
    with pytest.raises(SystemExit, match="--batch-views"):
        train_main(["--synthetic", "--batch-views", "0"])


def test_command_counts_steps_in_views(tmp_path):
    args = ["--synthetic", "--synthetic-gaussians", "300", "--synthetic-views", "9", "--width", "32",
            "--height", "24", "--sh-degree", "0", "--no-progress", "--snapshot-every", "0",
            "--eval-every", "4", "--steps", "8", "--batch-views", "2", "--out", str(tmp_path)]
    assert train_main(args) == 0
    r = json.loads((tmp_path / "results.json").read_text())
    assert (r["steps"], r["views_per_step"], r["views_seen"]) == (4, 2, 8)
    assert [e[0] for e in r["history"]["train_eval"]] == [2, 4]  # every 4 views = 2 steps
