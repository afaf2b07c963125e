"""The localization benchmark's map degradation (gsrender.loc.room.degrade): merged cells are
moment-matched (mean and covariance of their members), merging at several cell sizes leaves
(1 − share)^scales of the surface untouched, and the benchmark pools queries across rooms."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from gsrender import synthetic as syn
from gsrender.loc import room as RM
from gsrender.reference import covariances

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _floor(n=4000, seed=0):
    return syn.ground_plane(n, half_size=1.0, generator=torch.Generator().manual_seed(seed))


def test_merge_everything_is_moment_matched_per_cell():
    model = _floor()
    cell = 0.5  # 4×4 cells on the 2 m floor
    out = RM.degrade(model, merge_share=1.0, merge_cells=cell, floater_share=0.0, jitter=0.0)
    keys = torch.floor(model.means.double() / cell).long()
    uniq, inv = torch.unique(keys, dim=0, return_inverse=True)
    assert out.num_gaussians == uniq.shape[0]
    cov = covariances(model.quats.double(), model.scales.double())
    out_cov = covariances(out.quats.double(), out.scales.double())
    out_keys = torch.floor(out.means.double() / cell).long()
    for g in range(uniq.shape[0]):
        members = inv == g
        mu = model.means[members].double().mean(0)
        d = model.means[members].double() - mu
        C = (cov[members] + d[:, :, None] * d[:, None, :]).mean(0)
        j = int((out_keys == uniq[g]).all(1).nonzero()[0, 0])  # the merged Gaussian of cell g
        assert torch.allclose(out.means[j].double(), mu, atol=1e-5)
        assert torch.allclose(out_cov[j], C, atol=1e-6)
        assert out.opacities[j] == pytest.approx(float(model.opacities[members].max()))


def test_multi_scale_merging_leaves_the_expected_share_and_adds_floaters():
    model = _floor(20000, seed=1)
    share = 0.5
    out = RM.degrade(model, merge_share=share, merge_cells=(0.12, 0.06, 0.03),
                     floater_share=0.05, jitter=0.0, seed=3)
    # untouched surfels keep their exact means (no jitter): count them
    orig = {tuple(p) for p in model.means.tolist()}
    kept = sum(tuple(p) in orig for p in out.means.tolist())
    assert abs(kept / model.num_gaussians - (1 - share) ** 3) < 0.05
    n_f = int(0.05 * model.num_gaussians)
    assert (out.opacities[-n_f:] <= 0.3 + 1e-6).all()
    assert out.num_gaussians < model.num_gaussians  # merging shrinks the map
    same = RM.degrade(model, merge_share=share, merge_cells=(0.12, 0.06, 0.03), seed=3)
    again = RM.degrade(model, merge_share=share, merge_cells=(0.12, 0.06, 0.03), seed=3)
    assert torch.equal(same.means, again.means)  # seeded


def test_pool_takes_medians_and_recalls_over_all_queries():
    import loc_synthetic as B

    def run(t, pts):
        times = [{"features": 1.0, "matching": 2.0, "pnp": 3.0, "total": 6.0}] * len(t)
        r = {"t_err": t, "r_err": [0.1] * len(t), "times": times, "inlier_ratio": [0.5] * len(t),
             "err3d": [0.004] * len(t), "map_points": pts, "build_s": 1.0, "n_gaussians": 10,
             "n_selected": 5}
        return {m: r for m in B.METHODS}

    res = B.pool([run([0.005, 0.015], 100), run([0.03, math.inf], 200)])["splitgs"]
    assert res["median_t_cm"] == pytest.approx(2.25)  # median of 0.5, 1.5, 3, inf cm
    assert res["recall_1cm1deg"] == 0.25 and res["recall_2cm2deg"] == 0.5
    assert res["recall_5cm5deg"] == 0.75 and res["map_points"] == 150 and res["queries"] == 4
