"""The headroom regime of the trained-model scenes (studies/scenes.py REGIMES): what sets it
apart from the other sizes, checked on the ground truth and the init points (no training)."""
from __future__ import annotations

import torch

from studies import scenes as T


def test_headroom_ground_truth_is_view_dependent_and_solid():
    gt, n = T.ground_truth("headroom", 0)
    plain, _ = T.ground_truth("small", 0)
    r = T.REGIMES["headroom"]
    assert gt.sh_degree == r.gt_sh_degree == 3 and plain.sh_degree < 3
    assert float(gt.sh[:, 1:].std()) > 0.5 * r.gt_sh_std
    bg, bg_plain = gt.object_ids == 0, plain.object_ids == 0  # the room: the same Gaussians
    torch.testing.assert_close(gt.sh[bg, :plain.sh.shape[1]], plain.sh[bg_plain])
    # solid synthetic objects: a share of their Gaussians lies inside, away from the surface the
    # other sizes stop at (the same object, count and seed)
    for k in range(1, n):
        obj, surface = gt.means[gt.object_ids == k], plain.means[plain.object_ids == k]
        assert obj.shape[0] == surface.shape[0]
        off = torch.cdist(obj, surface).min(1).values
        assert float((off > 0.06).float().mean()) > 0.15


def test_headroom_init_is_noisy_with_floaters():
    gt, _ = T.ground_truth("headroom", 0)
    seen = torch.full((gt.num_gaussians,), 3, dtype=torch.int32)
    r = T.REGIMES["headroom"]
    xyz, rgb = T.init_points(gt, seen, 2000, 0, r)
    plain, _ = T.init_points(gt, seen, 2000, 0)
    d = torch.cdist(xyz, gt.means).min(1).values
    d_plain = torch.cdist(plain, gt.means).min(1).values
    assert float(d_plain.max()) < 0.06 and float(d.median()) > 2 * float(d_plain.median())
    # the floaters: a regime.floaters share far from every ground-truth Gaussian
    assert abs(float((d > 0.2).float().mean()) - r.floaters) < 0.1
    assert xyz.shape == (2000, 3) and rgb.dtype == torch.uint8


def test_headroom_config_names_its_regime_and_leaves_other_sizes_alone():
    assert T.config("headroom")["regime"]["floaters"] == T.REGIMES["headroom"].floaters
    assert "regime" not in T.config("full")  # scenes cached before the regime still load
    sz = T.SIZES["headroom"]
    assert sz.max_gaussians >= 4 * (sz.n_floor + sz.n_walls + 2 * sz.per_object + sz.plant)
