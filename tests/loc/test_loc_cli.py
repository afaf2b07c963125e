"""`gsrender loc build` / `gsrender loc query` end to end on real photos (snowmiku_small: SfM
points as small Gaussians, 11 training photos, 2 held-out queries); skipped without the data."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gsrender.cli.main import main
from gsrender.io import paths, save_ply
from gsrender.scene import GaussianModel, rgb_to_sh

SNOW = paths.data_dir() / "snowmiku_small"
pytestmark = pytest.mark.skipif(not (SNOW / "cameras_small.json").is_file(),
                                reason="shared snowmiku_small data absent")


def test_loc_build_and_query_cli(tmp_path, capsys):
    pts = np.load(SNOW / "sfm_points.npz")
    xyz, rgb = torch.from_numpy(pts["xyz"]).float(), torch.from_numpy(pts["rgb"]).float() / 255
    N = xyz.shape[0]
    model = GaussianModel(means=xyz, quats=torch.tensor([[1.0, 0, 0, 0]]).repeat(N, 1),
                          scales=torch.full((N, 3), 0.027), opacities=torch.full((N,), 0.9),
                          sh=rgb_to_sh(rgb)[:, None, :])
    save_ply(tmp_path / "scene.ply", model)
    frames = json.loads((SNOW / "cameras_small.json").read_text())["frames"]
    held = (4, 7)
    train = [f for i, f in enumerate(frames) if i not in held]
    (tmp_path / "train.json").write_text(json.dumps({"frames": train}))
    (tmp_path / "query.json").write_text(json.dumps({"frames": [frames[i] for i in held]}))
    images = str(SNOW / "images")
    assert main(["loc", "build", "--scene", str(tmp_path / "scene.ply"), "--cameras-json",
                 str(tmp_path / "train.json"), "--images", images, "--out",
                 str(tmp_path / "map.npz")]) == 0
    assert "map points" in capsys.readouterr().out
    assert main(["loc", "query", "--map", str(tmp_path / "map.npz"), "--cameras-json",
                 str(tmp_path / "query.json"), "--images", images, "--json",
                 str(tmp_path / "q.json")]) == 0
    res = json.loads((tmp_path / "q.json").read_text())
    assert len(res["queries"]) == 2 and "recall_5cm5deg" in res["summary"]
    ok = [q for q in res["queries"] if q["success"]]
    assert ok, "no held-out photo localized"
    # the plush spans ~20 SfM units: a localized photo is within a unit and a few degrees
    assert min(q["t_err"] for q in ok) < 1.0 and min(q["r_err_deg"] for q in ok) < 5.0
    assert main(["loc", "query", "--map", str(tmp_path / "map.npz"), "--cameras-json",
                 str(tmp_path / "query.json"), "--images", images, "--pnp", "opencv", "--json",
                 str(tmp_path / "q_cv.json")]) == 0  # the OpenCV USAC path localizes too
    ok_cv = [q for q in json.loads((tmp_path / "q_cv.json").read_text())["queries"] if q["success"]]
    assert ok_cv and min(q["t_err"] for q in ok_cv) < 1.0
    assert main(["loc", "query", "--map", str(tmp_path / "scene.ply"), "--cameras-json",
                 str(tmp_path / "query.json"), "--images", images]) == 1  # not a map file
