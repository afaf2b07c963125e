"""Distorted cameras in files and commands (docs/cameras.md): COLMAP's SIMPLE_RADIAL, RADIAL,
OPENCV, FULL_OPENCV and OPENCV_FISHEYE load with their coefficients in gsplat's layout (text and
binary), and the writers and camera JSON carry them back. Rendering them: tests/tooling/test_cli.py
(`gsrender render --colmap`) and tests/train/test_train.py (`gsrender train --colmap`'s dataset).
"""
from __future__ import annotations

import json
import struct

import pytest
import torch

from gsrender.cameras import load_cameras_json, save_cameras_json
from gsrender.distortion import COEFFICIENTS
from gsrender.io import Camera, load_colmap_cameras, write_colmap_binary, write_colmap_text
from gsrender.io.colmap import read_colmap_model

R, T = "radial_coeffs", "tangential_coeffs"
# a COLMAP camera line (model, params after fx [fy] cx cy) -> its coefficients in gsplat's layout
MODELS = [
    ("SIMPLE_RADIAL", [0.05], {R: [0.05, 0, 0, 0, 0, 0]}),
    ("RADIAL", [0.05, -0.01], {R: [0.05, -0.01, 0, 0, 0, 0]}),
    ("OPENCV", [0.05, -0.01, 1e-3, -2e-3], {R: [0.05, -0.01, 0, 0, 0, 0], T: [1e-3, -2e-3]}),
    ("FULL_OPENCV", [0.05, -0.01, 1e-3, -2e-3, 0.002, 0.01, -0.003, 0.001],
     {R: [0.05, -0.01, 0.002, 0.01, -0.003, 0.001], T: [1e-3, -2e-3]}),
    ("OPENCV_FISHEYE", [0.05, -0.01, 0.002, -4e-4], {R: [0.05, -0.01, 0.002, -4e-4]}),
]
_IDS = {"SIMPLE_RADIAL": 2, "RADIAL": 3, "OPENCV": 4, "OPENCV_FISHEYE": 5, "FULL_OPENCV": 6}


def _write_model(sparse, model: str, dist: list[float], binary: bool, width=100, height=80,
                 pose=(1, 0, 0, 0, 0, 0, 1), intrinsics=None):
    """A one-camera, one-image COLMAP model (intrinsics: f [fy] cx cy, by default 60 [61] 50 40)."""
    sparse.mkdir(parents=True, exist_ok=True)
    if intrinsics is None:
        intrinsics = [60.0, 50.0, 40.0] if model in ("SIMPLE_RADIAL", "RADIAL") else [60.0, 61.0, 50.0, 40.0]
    params = [*intrinsics, *dist]
    if binary:
        (sparse / "cameras.bin").write_bytes(struct.pack(
            f"<QiiQQ{len(params)}d", 1, 1, _IDS[model], width, height, *params))
        (sparse / "images.bin").write_bytes(
            struct.pack("<Q", 1) + struct.pack("<i7di", 1, *pose, 1) + b"a.png\x00" + struct.pack("<Q", 0))
    else:
        (sparse / "cameras.txt").write_text(
            f"1 {model} {width} {height} {' '.join(repr(p) for p in params)}\n")
        (sparse / "images.txt").write_text(f"1 {' '.join(repr(float(v)) for v in pose)} 1 a.png\n\n")


def _as_lists(d: dict) -> dict:
    return {k: [round(float(x), 7) for x in v] for k, v in d.items()}


def _full(d: dict, model: str) -> dict:
    """Every coefficient list the lens model takes (zeros where d has none)."""
    return {k: _as_lists(d).get(k, [0.0] * w) for k, w in COEFFICIENTS[model].items()}


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize(("model", "dist", "want"), MODELS, ids=[m[0] for m in MODELS])
def test_colmap_distorted_models_load_their_coefficients(tmp_path, model, dist, want, binary):
    _write_model(tmp_path, model, dist, binary)
    (cam,) = load_colmap_cameras(tmp_path)
    assert cam.model == ("fisheye" if model == "OPENCV_FISHEYE" else "pinhole")
    assert _as_lists(cam.distortion) == _as_lists(want)


def test_zero_coefficients_load_as_no_distortion(tmp_path):
    _write_model(tmp_path, "OPENCV", [0.0] * 4, binary=False)
    (cam,) = load_colmap_cameras(tmp_path)
    assert cam.distortion == {}


def _camera(model: str, distortion: dict, name="a.png") -> Camera:
    vm = torch.eye(4)
    vm[:3, 3] = torch.tensor([0.1, -0.2, 2.0])
    return Camera(name, 64, 48, torch.tensor([[40.0, 0, 32], [0, 41, 24], [0, 0, 1]]), vm,
                  model=model, distortion=distortion)


@pytest.mark.parametrize("writer", [write_colmap_text, write_colmap_binary])
@pytest.mark.parametrize(("model", "distortion", "written_as"), [
    ("pinhole", {R: [0.05, -0.01, 0, 0, 0, 0]}, "OPENCV"),
    ("pinhole", {T: [1e-3, 0.0]}, "OPENCV"),
    ("pinhole", {R: [0.05, -0.01, 0.002, 0.01, 0, 0], T: [1e-3, -2e-3]}, "FULL_OPENCV"),
    ("fisheye", {R: [0.05, -0.01, 0.002, -4e-4]}, "OPENCV_FISHEYE"),
    ("pinhole", {}, "PINHOLE"),
])
def test_colmap_writers_carry_the_coefficients(tmp_path, writer, model, distortion, written_as):
    cams = [_camera(model, distortion)]
    writer(tmp_path, cams)
    intr, _ = read_colmap_model(tmp_path)
    assert [c.model for c in intr.values()] == [written_as]
    (back,) = load_colmap_cameras(tmp_path)
    assert back.model == model
    assert _full(back.distortion, model) == _full(cams[0].distortion, model)
    torch.testing.assert_close(back.K, cams[0].K)


def test_colmap_writer_refuses_thin_prism(tmp_path):
    cam = _camera("pinhole", {"thin_prism_coeffs": [1e-3, 0, 0, 0]})
    with pytest.raises(ValueError, match="no pinhole model with thin-prism"):
        write_colmap_text(tmp_path, [cam])


def test_camera_json_carries_the_coefficients(tmp_path):
    cams = [_camera("pinhole", {R: [0.05, -0.01, 0, 0, 0, 0.001], "thin_prism_coeffs": [1e-3, 0, 0, 2e-4]}),
            _camera("pinhole", {}, name="b.png")]
    save_cameras_json(tmp_path / "c.json", cams)
    entries = json.loads((tmp_path / "c.json").read_text())
    assert "radial_coeffs" in entries[0] and "radial_coeffs" not in entries[1]
    assert "tangential_coeffs" not in entries[0]
    back = load_cameras_json(tmp_path / "c.json")
    assert _as_lists(back[0].distortion) == _as_lists(cams[0].distortion)
    assert back[1].distortion == {}
    fish = [_camera("fisheye", {R: [0.05, -0.01, 0.002, -4e-4]})]
    save_cameras_json(tmp_path / "f.json", fish)
    (b,) = load_cameras_json(tmp_path / "f.json")
    assert b.model == "fisheye" and _as_lists(b.distortion) == _as_lists(fish[0].distortion)


@pytest.mark.parametrize(("entry", "match"), [
    ({"camera_model": "fisheye", "tangential_coeffs": [0, 0]}, "takes no 'tangential_coeffs'"),
    ({"radial_coeffs": [0.1, 0.0]}, "'radial_coeffs' must be a list of 6 finite numbers"),
    ({"thin_prism_coeffs": [0, 0, 0, "x"]}, "'thin_prism_coeffs' must be a list of 4"),
])
def test_camera_json_bad_coefficients(tmp_path, entry, match):
    e = {"name": "a", "width": 8, "height": 6, "K": [[5, 0, 4], [0, 5, 3], [0, 0, 1]],
         "viewmat_w2c_opencv": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], **entry}
    (tmp_path / "c.json").write_text(json.dumps([e]))
    with pytest.raises(ValueError, match=match):
        load_cameras_json(tmp_path / "c.json")


@pytest.mark.parametrize(("model", "distortion", "match"), [
    ("fisheye", {T: [0.0, 0.0]}, "a 'fisheye' camera takes"),
    ("pinhole", {R: [0.1, 0.0]}, "radial_coeffs must hold 6 finite numbers"),
    ("ortho", {R: [0.0] * 6}, "a 'ortho' camera takes none"),
])
def test_camera_bad_distortion(model, distortion, match):
    with pytest.raises(ValueError, match=match):
        _camera(model, distortion)
