"""Removal-3D metrics on hand-made cases: perfect removal -> nRDE 0, nothing removed -> 1,
over-removal -> collateral error > 0; Gaussian IoU, quartile recall, mIoU, boundary IoU."""
from __future__ import annotations

import pytest
import torch

from gsrender.voda import metrics as M
from gsrender.voda import removal3d as R


@pytest.fixture(scope="module")
def scene():
    model, n = R.make_scene_model("isolated", seed=0, n_objects=2, n_per_object=200, n_floor=900,
                                  n_walls=300)
    vm, K = R.cameras(48, 36, 1, 3)
    masks, _ = R.instance_masks(model, n, vm, K, 48, 36)
    return model, vm, K, masks


def _metrics(scene, selected, obj=1):
    model, vm, K, masks = scene
    truth = model.object_ids == obj
    return M.removal_metrics(model, selected, truth, vm, K, 48, 36, masks == obj)


def test_perfect_removal_scores_zero(scene):
    model = scene[0]
    m = _metrics(scene, model.object_ids == 1)
    assert m["nrde"] == pytest.approx(0.0, abs=1e-6) and m["rde"] == pytest.approx(0.0, abs=1e-6)
    assert m["collateral"] == pytest.approx(0.0, abs=1e-6)
    assert m["gaussian_iou"] == 1.0 and m["recall_quartiles"] == [1.0] * 4


def test_nothing_removed_scores_one(scene):
    model = scene[0]
    m = _metrics(scene, torch.zeros(model.num_gaussians, dtype=torch.bool))
    assert m["nrde"] == pytest.approx(1.0) and m["rde"] > 0.05
    assert m["gaussian_iou"] == 0.0 and m["recall_q1"] == 0.0


def test_over_removal_shows_collateral(scene):
    model = scene[0]
    sel = (model.object_ids == 1) | (model.object_ids == 2)
    sel |= (model.object_ids == 0) & (torch.arange(model.num_gaussians) % 3 == 0)  # floor holes
    m = _metrics(scene, sel)
    assert m["collateral"] > 0.01
    assert m["gaussian_iou"] < 1.0


def test_half_removal_is_in_between(scene):
    model = scene[0]
    sel = (model.object_ids == 1) & (torch.arange(model.num_gaussians) % 2 == 0)
    assert 0.0 < _metrics(scene, sel)["nrde"] < 1.0


def test_gaussian_iou_and_quartile_recall_by_hand():
    truth = torch.tensor([1, 1, 1, 1, 0, 0], dtype=torch.bool)
    sel = torch.tensor([1, 1, 0, 0, 1, 0], dtype=torch.bool)
    op = torch.tensor([1.0, 1.0, 1.0, 1.0, 2.0, 5.0])
    assert M.gaussian_iou(sel, truth, op) == pytest.approx(2 / 6)
    contrib = torch.tensor([4.0, 3.0, 1.0, 2.0, 9.0, 9.0])  # quartiles: ids 2, 3, 1, 0
    assert M.recall_per_quartile(sel, truth, contrib) == [0.0, 0.0, 1.0, 1.0]


def test_miou_and_boundary_iou_by_hand():
    gt = torch.zeros(1, 10, 10, dtype=torch.long)
    gt[0, 2:8, 2:8] = 1
    assert M.miou(gt, gt) == 1.0
    pred = gt.clone()
    pred[0, 2:8, 2] = 0  # one column lost: object IoU 30/36, background 64/70
    assert M.miou(pred, gt) == pytest.approx((30 / 36 + 64 / 70) / 2)
    assert M.boundary_iou(gt == 1, gt == 1) == 1.0
    assert M.boundary_iou(pred == 1, gt == 1) < M.iou(pred == 1, gt == 1)


def test_contributions_match_rendered_alpha(scene):
    model, vm, K, _ = scene
    c = M.contributions(model, vm, K, 48, 36)
    _, a = M.expected_depth(model, vm, K, 48, 36)
    assert c.min() >= 0
    torch.testing.assert_close(c.sum(), a.sum(), rtol=1e-4, atol=1e-3)
