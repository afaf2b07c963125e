"""The localization benchmark's map degradation (gsrender.loc.room.degrade): merged cells are
moment-matched (mean and covariance of their members), merging at several cell sizes leaves
(1 − share)^scales of the surface untouched, and the benchmark pools queries across rooms."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from gsrender import synthetic as syn
from gsrender.loc import room as RM
from gsrender.reference import covariances


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


def test_texture_driven_merge_prefers_flat_cells():
    """texture_corr = 1 merges exactly the cells whose members' luminance spread is lowest;
    texture_corr = 0 is blind to texture. Half of the floor is flat (one colour)."""
    model = _floor(20000, seed=2)
    flat = model.means[:, 0] < 0
    rgb = torch.where(flat[:, None], torch.full((model.num_gaussians, 3), 0.5),
                      torch.rand(model.num_gaussians, 3, generator=torch.Generator().manual_seed(0)))
    model = replace(model, sh=((rgb - 0.5) / 0.28209479177387814)[:, None, :])
    orig = {tuple(p) for p in model.means.tolist()}

    def merged_share(corr):
        out = RM.degrade(model, merge_share=0.5, merge_cells=0.1, texture_corr=corr,
                         floater_share=0.0, jitter=0.0, seed=5)
        kept = torch.tensor([tuple(p) in orig for p in out.means.tolist()])
        kept_flat = (out.means[kept, 0] < 0).sum() / flat.sum()
        kept_tex = (out.means[kept, 0] >= 0).sum() / (~flat).sum()
        return float(kept_flat), float(kept_tex)

    kf, kt = merged_share(1.0)
    assert kf < 0.05 and kt > 0.9  # the flat half merged, the textured half kept
    kf, kt = merged_share(0.0)
    assert abs(kf - 0.5) < 0.15 and abs(kt - 0.5) < 0.15
    with pytest.raises(ValueError, match="texture_corr"):
        RM.degrade(model, texture_corr=1.5)


def test_randomised_layouts_differ_per_seed_and_queries_sit_where_asked():
    a, b = RM.make_room(4000, seed=1, randomize=True), RM.make_room(4000, seed=2, randomize=True)
    assert a.means[:, 0].max() != pytest.approx(float(b.means[:, 0].max()), abs=1e-3)
    tv, _ = RM.loop_cameras(8, radius=0.5, height=1.1)
    gen = torch.Generator().manual_seed(0)
    centres = lambda v: -(v[:, :3, :3].transpose(1, 2) @ v[:, :3, 3:])[..., 0]
    for place, lo, hi in (("near", 0.0, 0.06), ("beyond", 0.25, 0.6)):
        q, _ = RM.query_cameras(place, 6, tv, gen)
        d = torch.cdist(centres(q.double()), centres(tv.double())).min(1).values
        assert ((d >= lo) & (d <= hi)).all(), (place, d)


def test_benchmark_aggregates_per_room_with_intervals():
    from studies.loc import synthetic as B

    r = {"t_err": [0.005, 0.015, 0.03, math.inf], "r_err": [0.1] * 4, "ms": [5.0] * 4,
         "inliers": [30] * 4, "err3d": [0.004, 0.004, math.nan, math.nan]}
    m = B.room_metrics(r)
    assert m["recall_1cm1deg"] == 0.25 and m["recall_2cm2deg"] == 0.5
    assert m["median_t_cm"] == pytest.approx(2.25) and m["err3d_cm"] == pytest.approx(0.4)
    mean, hw = B.mean_ci([0.5, 0.7, 0.6])
    assert mean == pytest.approx(0.6) and hw == pytest.approx(4.303 * 0.1 / math.sqrt(3))
