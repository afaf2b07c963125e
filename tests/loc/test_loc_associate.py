"""SplitGS-Loc's faithful pieces: one keypoint → one Gaussian (the candidate most responsible at
the keypoint's ray point, not the heaviest nor all of them), Lowe's ratio test in the query
matcher (also when the runner-up sits in another chunk of the map), and the diagnostics' signs
and sibling bookkeeping."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gsrender.cameras import intrinsics, look_at
from gsrender.loc import diagnostics as D
from gsrender.loc.associate import associate
from gsrender.loc.query import mutual_nn
from gsrender.scene import GaussianModel


def _siblings():
    """Two children of a split flat Gaussian on the z = 0 plane, ±0.1 m apart along x, and a
    camera 3 m above looking down."""
    model = GaussianModel(means=torch.tensor([[-0.1, 0.0, 0.0], [0.1, 0.0, 0.0]]),
                          quats=torch.tensor([[1.0, 0, 0, 0]]).repeat(2, 1),
                          scales=torch.tensor([[0.06, 0.1, 0.002]]).repeat(2, 1),
                          opacities=torch.tensor([0.8, 0.8]), sh=torch.zeros(2, 1, 3))
    vm = look_at(torch.tensor([0.0, 0.0, 3.0]), torch.tensor([0.0, 0.0, 0.0]), up=(0.0, 1.0, 0.0))
    K = intrinsics(96, 72, 60.0)
    return model, vm, K


def _project(X, vm, K):
    pc = X.double() @ vm[:3, :3].double().T + vm[:3, 3].double()
    return ((pc[:, :2] / pc[:, 2:]) * K.double().diagonal()[:2] + K[:2, 2].double()).numpy()


def test_ray_point_lifts_a_keypoint_onto_the_sibling_under_it():
    """A keypoint over child 1's centre lifts onto child 1 alone, even when child 0 has the
    larger composition weight at its pixel; under "all" it lifts onto both."""
    model, vm, K = _siblings()
    kps = _project(torch.tensor([[0.1, 0.0, 0.0], [-0.1, 0.02, 0.0]]), vm, K)
    ids = torch.tensor([[0, 1], [1, 0]])
    ws = torch.tensor([[0.5, 0.4], [0.5, 0.4]])  # the heavier candidate is the wrong sibling
    p, g, w = associate(model, kps, ids, ws, K, vm, tau_a=0.2)
    assert p.tolist() == [0, 1] and g.tolist() == [1, 0]
    assert torch.allclose(w, torch.tensor([0.4, 0.4]))
    p_all, g_all, _ = associate(model, kps, ids, ws, K, vm, tau_a=0.2, rule="all")
    assert p_all.tolist() == [0, 0, 1, 1] and sorted(g_all.tolist()) == [0, 0, 1, 1]


def test_ray_point_keeps_tau_a_and_skips_empty_pixels():
    model, vm, K = _siblings()
    kps = _project(torch.tensor([[0.1, 0.0, 0.0], [0.1, 0.0, 0.0]]), vm, K)
    ids = torch.tensor([[0, 1], [-1, -1]])
    ws = torch.tensor([[0.5, 0.1], [0.0, 0.0]])  # the responsible child is faint: not lifted
    p, _, _ = associate(model, kps, ids, ws, K, vm, tau_a=0.2)
    assert p.numel() == 0
    p, g, _ = associate(model, kps, ids, ws, K, vm, tau_a=0.05)
    assert p.tolist() == [0] and g.tolist() == [1]
    with pytest.raises(ValueError, match="rule"):
        associate(model, kps, ids, ws, K, vm, tau_a=0.2, rule="nearest")


def test_ray_point_is_the_weighted_depth_of_the_candidates():
    """Two Gaussians on one ray, 1 m apart in depth: the keypoint goes to the one whose density
    peaks nearer the weighted ray point, i.e. to the heavier of the two here."""
    model = GaussianModel(means=torch.tensor([[0.0, 0.0, 0.5], [0.0, 0.0, -0.5]]),
                          quats=torch.tensor([[1.0, 0, 0, 0]]).repeat(2, 1),
                          scales=torch.tensor([[0.1, 0.1, 0.05]]).repeat(2, 1),
                          opacities=torch.tensor([0.5, 0.9]), sh=torch.zeros(2, 1, 3))
    vm = look_at(torch.tensor([0.0, 0.0, 3.0]), torch.tensor([0.0, 0.0, 0.0]), up=(0.0, 1.0, 0.0))
    K = intrinsics(96, 72, 60.0)
    kps = _project(torch.zeros(1, 3), vm, K)
    for ws, want in (([0.3, 0.6], 1), ([0.6, 0.3], 0)):
        _, g, _ = associate(model, kps, torch.tensor([[0, 1]]), torch.tensor([ws]), K, vm,
                            tau_a=0.2)
        assert g.tolist() == [want]


def test_ratio_test_drops_ambiguous_matches_across_chunks():
    """q0 is near two near-duplicate map descriptors (split siblings): mutual NN keeps it, the
    ratio test drops it, also when the two sit in different chunks; q1's match is distinctive."""
    ref = torch.nn.functional.normalize(torch.tensor([[1.0, 0.05, 0, 0], [1.0, -0.05, 0, 0],
                                                      [0, 0, 1.0, 0]]), dim=1)
    # q0's distances to ref0 and ref1: 0.045 and 0.055 (ratio 0.82)
    q = torch.nn.functional.normalize(torch.tensor([[1.0, 0.005, 0, 0], [0, 0.1, 1.0, 0]]), dim=1)
    for chunk in (1, 2, 8):
        assert sorted(map(tuple, mutual_nn(q, ref, chunk=chunk).tolist())) == [(0, 0), (1, 2)]
        assert mutual_nn(q, ref, chunk=chunk, ratio=0.8).tolist() == [[1, 2]]
    # a map of one point has no runner-up: its mutual match passes
    assert mutual_nn(q[:1], ref[:1], ratio=0.8).tolist() == [[0, 0]]


def test_signed_depth_error_and_axial_displacement_signs():
    vm = look_at(torch.tensor([0.0, 0.0, 3.0]), torch.tensor([0.0, 0.0, 0.0]),
                 up=(0.0, 1.0, 0.0)).double().numpy()
    gt = np.array([[0.0, 0.0, 0.0], [0.2, 0.1, 0.0]])
    behind = gt - np.array([0.0, 0.0, 0.05])  # 5 cm further from the camera above
    assert np.allclose(D.signed_depth_error(behind, gt, vm), 0.05)
    assert np.allclose(D.signed_depth_error(gt, behind, vm), -0.05)
    R, t = vm[:3, :3], vm[:3, 3]
    c_back = np.array([0.0, 0.0, 3.1])  # 10 cm further back along the optical axis
    assert D.axial_displacement(vm, R, -R @ c_back) == pytest.approx(0.1)
    assert D.axial_displacement(vm, R, t) == pytest.approx(0.0, abs=1e-12)


def test_wrong_sibling_counts_only_families_with_a_nearer_member():
    points = np.array([[0.0, 0, 0], [0.1, 0, 0], [1.0, 0, 0], [2.0, 0, 0], [2.1, 0, 0]])
    parents = np.array([7, 7, 3, 5, 5])
    matched = np.array([0, 2, 4, 3])
    gt = np.array([[0.09, 0, 0], [1.0, 0, 0], [2.09, 0, 0], [1.99, 0, 0]])
    has, wrong = D.wrong_sibling(points, parents, matched, gt)
    assert has.tolist() == [True, False, True, True]
    assert wrong.tolist() == [True, False, False, False]
    has, wrong = D.wrong_sibling(points, np.arange(5), matched, gt)  # unsplit: no families
    assert not has.any() and not wrong.any()
