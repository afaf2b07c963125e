"""SplitGS-Loc pieces: mutual-NN matching on hand-built descriptors, PnP + RANSAC on synthetic
correspondences with outliers, pose metrics on known poses, selection, the map file, and a tiny
end-to-end build + localize with a plug-in extractor."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gsrender.loc import metrics as LM
from gsrender.loc.lift import LiftedMap
from gsrender.loc.mapfile import load_map, save_map
from gsrender.loc.query import mutual_nn, solve_pnp
from gsrender.loc.select import select_gaussians
from gsrender.loc.stats import WeightStats


def _rot(axis, deg):
    import cv2

    return cv2.Rodrigues(np.asarray(axis, np.float64) / np.linalg.norm(axis) * math.radians(deg))[0]


def test_mutual_nn_hand_built():
    ref = torch.eye(4)  # 4 orthonormal map descriptors
    q = torch.tensor([[0.9, 0.1, 0, 0], [0.8, 0.2, 0, 0], [0, 0, 1.0, 0], [0, 0, 0.1, 0.9]])
    q = torch.nn.functional.normalize(q, dim=1)
    m = mutual_nn(q, ref, chunk=3)  # chunks smaller than the map
    # q0 and q1 both prefer ref0, which prefers q0: only q0-ref0 is mutual; q2-ref2; q3-ref3
    assert sorted(map(tuple, m.tolist())) == [(0, 0), (2, 2), (3, 3)]
    assert mutual_nn(q[:0], ref).shape == (0, 2)
    with pytest.raises(ValueError, match="query"):
        mutual_nn(q[:, :3], ref)


@pytest.mark.parametrize("backend", ["opencv", "poselib"])
def test_pnp_with_outliers_recovers_pose(backend):
    if backend == "poselib":
        pytest.importorskip("poselib")
    rng = np.random.default_rng(0)
    K = np.array([[500.0, 0, 320], [0, 500.0, 240], [0, 0, 1]])
    R, t = _rot([0.2, 1.0, 0.1], 20.0), np.array([0.1, -0.2, 3.0])
    X = rng.uniform([-1.5, -1, -1], [1.5, 1, 1], (300, 3))
    pc = X @ R.T + t
    uv = pc[:, :2] / pc[:, 2:] * [K[0, 0], K[1, 1]] + K[:2, 2]
    uv += rng.normal(0, 0.3, uv.shape)
    out = rng.random(300) < 0.4  # 40 % outliers
    uv[out] = rng.uniform([0, 0], [640, 480], (out.sum(), 2))
    ok, R_est, t_est, inl = solve_pnp(uv, X, K, 640, 480, backend=backend)
    assert ok
    te, re = LM.pose_errors(R, t, R_est, t_est)
    assert te < 0.01 and re < 0.2
    assert inl[~out].mean() > 0.9 and inl[out].mean() < 0.05
    ok, *_ = solve_pnp(uv[:3], X[:3], K, 640, 480, backend=backend)
    assert not ok
    with pytest.raises(ValueError, match="points2d"):
        solve_pnp(uv, X[:10], K, 640, 480)


def test_pose_errors_and_summary_on_known_poses():
    R = _rot([0, 0, 1], 30.0)
    t = np.array([0.5, 0.0, 2.0])
    c = -R.T @ t
    R2 = _rot([0, 0, 1], 33.0)  # 3° more about z
    c2 = c + np.array([0.0, 0.03, 0.04])  # 5 cm away
    te, re = LM.pose_errors(R, t, R2, -R2 @ c2)
    assert te == pytest.approx(0.05, abs=1e-9) and re == pytest.approx(3.0, abs=1e-6)
    s = LM.summarize([0.005, 0.015, 0.04, math.inf], [0.5, 1.5, 4.0, math.inf])
    assert s["recall_1cm1deg"] == 0.25 and s["recall_2cm2deg"] == 0.5
    assert s["recall_5cm5deg"] == 0.75
    assert s["median_t_cm"] == pytest.approx(2.75) and s["median_r_deg"] == pytest.approx(2.75)


def test_select_min_views_and_spatial_suppression():
    st = WeightStats(w_sum=torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0]), w_max=torch.ones(5),
                     n_views=torch.tensor([3, 2, 1, 2, 5], dtype=torch.int32))
    means = torch.tensor([[0.0, 0, 0], [0.05, 0, 0], [1, 1, 1], [2.0, 0, 0], [3.0, 0, 0]])
    assert select_gaussians(st, means, min_views=2).tolist() == [0, 1, 3, 4]
    # 0 and 1 share a 0.5-cell: the weaker one is suppressed, then the budget keeps the 2 best
    assert select_gaussians(st, means, min_views=2, suppression_radius=0.5).tolist() == [0, 3, 4]
    assert select_gaussians(st, means, min_views=2, budget=2, suppression_radius=0.5).tolist() == [0, 3]
    with pytest.raises(ValueError, match="budget"):
        select_gaussians(st, means, budget=0)


def test_map_file_roundtrip_and_rejects_foreign(tmp_path):
    m = LiftedMap(points=torch.randn(5, 3), descriptors=torch.randn(5, 8),
                  gaussian_ids=torch.arange(5), consistency=torch.rand(5),
                  n_obs=torch.ones(5, dtype=torch.int64))
    p = tmp_path / "map.npz"
    save_map(p, m, {"method": "splitgs"})
    m2, meta = load_map(p)
    assert meta == {"method": "splitgs"}
    assert torch.equal(m2.points, m.points) and torch.equal(m2.descriptors, m.descriptors)
    np.savez(tmp_path / "bad.npz", points=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="path"):
        load_map(tmp_path / "bad.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="path"):
        load_map(tmp_path / "junk.npz")


def test_build_and_localize_with_plugin_extractor():
    """A textured plane seen by 3 views; the plug-in 'descriptor' is the keypoint's true 3-d
    position hashed into a one-hot code, so lifting and matching are exact and PnP must recover
    the query pose."""
    from gsrender.loc import pipeline as P
    from gsrender.loc.query import localize
    from gsrender.scene import GaussianModel
    from gsrender.synthetic import intrinsics, look_at

    g = torch.Generator().manual_seed(0)
    n = 40 * 30
    xs, ys = torch.meshgrid(torch.linspace(-2, 2, 40), torch.linspace(-1.5, 1.5, 30), indexing="ij")
    means = torch.stack([xs.reshape(-1), ys.reshape(-1), torch.zeros(n)], 1)
    model = GaussianModel(means=means, quats=torch.tensor([[1.0, 0, 0, 0]]).repeat(n, 1),
                          scales=torch.tensor([[0.04, 0.04, 0.004]]).repeat(n, 1),
                          opacities=torch.full((n,), 0.95), sh=torch.zeros(n, 1, 3))
    Wd, Hd = 160, 120
    eyes = torch.tensor([[0.0, 0.3, -4.0], [0.6, 0.0, -4.0], [-0.5, -0.2, -4.2], [0.2, 0.1, -3.9]])
    vms = look_at(eyes, torch.zeros(4, 3), up=(0.0, -1.0, 0.0))
    Ks = intrinsics(Wd, Hd, 60.0)[None].repeat(4, 1, 1)
    pick = torch.randperm(n, generator=g)[:150]  # the 'keypoints': centres of some Gaussians

    def extractor(view):
        vm, K = vms[view].double(), Ks[view].double()
        pc = means[pick].double() @ vm[:3, :3].T + vm[:3, 3]
        uv = (pc[:, :2] / pc[:, 2:]) * K.diagonal()[:2] + K[:2, 2]
        inside = ((uv >= 1) & (uv < torch.tensor([Wd - 1.0, Hd - 1.0]))).all(1)
        return uv[inside].float().numpy(), np.eye(n, dtype=np.float32)[pick[inside].numpy()]

    cfg = P.preset("splitgs", split=False, min_views=0, min_obs=1)
    m, info = P.build_map(model, vms[:3], Ks[:3], [0, 1, 2], Wd, Hd, extractor, cfg)
    assert info["map_points"] >= 100
    res = localize(np.zeros((Hd, Wd, 3), np.uint8), Ks[3].numpy(), m.points, m.descriptors,
                   lambda _img: extractor(3), reproj_px=2.0)
    assert res.success
    vm = vms[3].double().numpy()
    te, re = LM.pose_errors(vm[:3, :3], vm[:3, 3], res.R, res.t)
    assert te < 0.02 and re < 0.5
    assert set(res.timings_ms) == {"features", "matching", "pnp", "total"}
