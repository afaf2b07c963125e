"""Localization inputs in users' layouts, on small fabricated folders: 7-Scenes
(TestSplit.txt, seq-XX/frame-XXXXXX.{color.png,pose.txt}), Cambridge Landmarks
(dataset_test.txt), the intrinsics-only JSON; and the retrieval index helpers."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gsrender.cameras import load_cameras_json
from gsrender.loc import datasets as D
from gsrender.loc import retrieval as RT


def _png(path, w=8, h=6):
    import imageio.v3 as iio

    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, np.zeros((h, w, 3), np.uint8))


def _c2w(yaw_deg, centre):
    a = np.radians(yaw_deg)
    T = np.eye(4)
    T[:3, :3] = [[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]]
    T[:3, 3] = centre
    return T


def test_7scenes_layout(tmp_path):
    (tmp_path / "TestSplit.txt").write_text("sequence2\n")
    (tmp_path / "TrainSplit.txt").write_text("sequence1\nsequence3\n")
    poses = {}
    for seq in (1, 2, 3):
        for f in range(2):
            stem = tmp_path / f"seq-{seq:02d}" / f"frame-{f:06d}"
            _png(stem.with_name(stem.name + ".color.png"))
            poses[(seq, f)] = _c2w(10 * seq + f, [0.1 * seq, 0.2, -0.3 * f])
            np.savetxt(stem.with_name(stem.name + ".pose.txt"), poses[(seq, f)])
    test = D.load_7scenes(tmp_path, "test")
    assert [r.name for r in test] == ["seq-02/frame-000000.color.png", "seq-02/frame-000001.color.png"]
    vm = test[1].viewmat
    assert np.allclose(vm @ poses[(2, 1)], np.eye(4), atol=1e-9)  # world-to-camera = inverse
    assert test[0].K[0, 0] == D.SEVEN_SCENES_FOCAL and (test[0].width, test[0].height) == (640, 480)
    assert len(D.load_7scenes(tmp_path, "train", focal=585.0)) == 4
    with pytest.raises(ValueError, match="root"):
        D.load_7scenes(tmp_path / "nope")
    with pytest.raises(ValueError, match="split"):
        D.load_7scenes(tmp_path, "val")


def test_cambridge_layout(tmp_path):
    R = _c2w(30, [0, 0, 0])[:3, :3].T  # world-to-camera rotation
    c = np.array([1.0, -2.0, 0.5])
    w = np.sqrt(1 + np.trace(R)) / 2
    q = [w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w)]
    (tmp_path / "dataset_test.txt").write_text(
        "Visual Landmark Dataset V1\nImageFile, Camera Position [X Y Z], Camera Orientation [W P Q R]\n\n"
        f"seq3/frame00001.png {c[0]} {c[1]} {c[2]} {q[0]} {q[1]} {q[2]} {q[3]}\n")
    _png(tmp_path / "seq3" / "frame00001.png", 12, 8)
    (r,) = D.load_cambridge(tmp_path, "test", focal=10.0)
    assert r.name == "seq3/frame00001.png" and (r.width, r.height) == (12, 8)
    assert np.allclose(r.viewmat[:3, :3], R, atol=1e-9)
    assert np.allclose(-r.viewmat[:3, :3].T @ r.viewmat[:3, 3], c, atol=1e-9)  # the centre
    assert r.K[0, 0] == 10.0 and r.K[0, 2] == 6.0
    (tmp_path / "dataset_train.txt").write_text("h\nh\n\nseq3/frame00001.png 1 2 3\n")
    with pytest.raises(ValueError, match="line 4"):
        D.load_cambridge(tmp_path, "train")


def test_intrinsics_json(tmp_path):
    K = [[100.0, 0, 40], [0, 100.0, 30], [0, 0, 1]]
    (tmp_path / "q.json").write_text(json.dumps([{"file": "a.png", "width": 80, "height": 60, "K": K}]))
    (r,) = D.load_intrinsics_json(tmp_path / "q.json")
    assert r.viewmat is None and r.image_path == tmp_path / "a.png" and r.K[0, 0] == 100.0
    (tmp_path / "bad.json").write_text(json.dumps([{"file": "a.png", "K": K}]))
    with pytest.raises(ValueError, match="camera 0 needs positive integer 'width'"):
        D.load_intrinsics_json(tmp_path / "bad.json")
    # the one camera-JSON reader (gsrender.cameras): a file with poses reads the same both ways
    vm = [[1.0, 0, 0, 0.5], [0, 1.0, 0, 0], [0, 0, 1.0, 2.0], [0, 0, 0, 1.0]]
    (tmp_path / "posed.json").write_text(json.dumps(
        {"frames": [{"file": "a.png", "width": 80, "height": 60, "K": K, "viewmat_w2c_opencv": vm}]}))
    (r,) = D.load_intrinsics_json(tmp_path / "posed.json")
    (c,) = load_cameras_json(tmp_path / "posed.json")
    assert (r.name, r.image_path, r.width, r.height) == (c.name, c.image_path, c.width, c.height)
    assert np.array_equal(r.viewmat, vm) and np.array_equal(r.K, K)


def test_retrieval_index_picks_the_matching_view():
    g = torch.Generator().manual_seed(0)
    views = [torch.nn.functional.normalize(torch.randn(50, 16, generator=g) + 3 * torch.randn(1, 16, generator=g), dim=1)
             for _ in range(5)]
    cb, vd = RT.view_index([(None, v.numpy()) for v in views])
    assert vd.shape == (5, cb.numel())
    assert RT.top_views(views[3][:30], vd, cb, 1).tolist() == [3]
    pv = RT.pack_views(torch.tensor([0, 0, 1, 2]), torch.tensor([0, 4, 3, 9]), 3, 10)
    assert pv.shape == (3, 2)
    assert RT.points_in_views(pv, [4], 10).tolist() == [0]
    assert RT.points_in_views(pv, [3, 9], 10).tolist() == [1, 2]
    with pytest.raises(ValueError, match="top_k_views"):
        RT.top_views(views[0], vd, cb, 0)
