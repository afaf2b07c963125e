"""The `gsrender` command (info, demo, render), gsrender.viz, and the CPU benchmark's smoke mode."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from gsrender import viz
from gsrender.cameras import scene_orbit
from gsrender.cli.common import OPS, load_model
from gsrender.cli.main import main
from gsrender.io import Camera, save_ply, write_colmap_binary, write_colmap_text
from gsrender.io.paths import sample_dir
from gsrender.render import rasterize
from gsrender.scene import GaussianModel, rgb_to_sh

ROOT = Path(__file__).resolve().parents[2]
needs_sample = pytest.mark.skipif(not (sample_dir() / "scene.ply").is_file(),
                                  reason="data/sample (the bundled sample scene) is missing")


def _tiny_model(n: int = 300, seed: int = 0) -> GaussianModel:
    g = torch.Generator().manual_seed(seed)
    return GaussianModel(
        means=torch.rand(n, 3, generator=g) * 2 - 1,
        quats=torch.randn(n, 4, generator=g),
        scales=torch.rand(n, 3, generator=g) * 0.08 + 0.02,
        opacities=torch.rand(n, generator=g) * 0.5 + 0.45,
        sh=rgb_to_sh(torch.rand(n, 3, generator=g))[:, None, :],
    )


# ---------------------------------------------------------------------------------------------
# info


def test_info_lists_every_op(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "gsrender 0.1.0" in out and "backends: cpu" in out
    for op in OPS:
        assert op in out


def test_info_json():
    proc = subprocess.run([sys.executable, "-m", "gsrender", "info", "--json"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    d = json.loads(proc.stdout)
    assert set(d["ops"]) == set(OPS)
    assert "cpu" in d["backends"]
    assert d["compiled_with_cuda"] == any(b["CUDA"] for b in d["ops"].values())
    # CPU kernels are always built
    assert all(b["CPU"] for b in d["ops"].values()), d["missing_cpu_kernels"]


def test_bad_arguments_exit_nonzero(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["render"])  # --scene is required
    assert e.value.code == 2
    assert main(["render", "--scene", str(tmp_path / "missing.ply")]) == 1
    (tmp_path / "x.obj").write_text("not a scene")
    assert main(["render", "--scene", str(tmp_path / "x.obj")]) == 1
    assert "--scene" in capsys.readouterr().err
    assert main(["demo", "--scene", str(tmp_path), "--out", str(tmp_path / "o")]) == 1


# ---------------------------------------------------------------------------------------------
# demo


@needs_sample
def test_demo_writes_views_sheet_and_timings(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--max-views", "2", "--no-progress", "--turntable-frames", "2"]) == 0
    for i in range(2):
        for kind in ("rgb", "depth", "alpha", "features_pca"):
            assert (out / f"{kind}_{i:02d}.png").is_file(), f"{kind}_{i:02d}.png"
    assert not (out / "rgb_02.png").exists()
    assert (out / "overview.png").is_file()
    rgb = iio.imread(out / "rgb_00.png")
    cams = json.loads((sample_dir() / "cameras.json").read_text())
    first = cams[0] if isinstance(cams, list) else cams["frames"][0]
    assert rgb.shape == (first["height"], first["width"], 3)
    assert rgb.std() > 5  # a picture, not a flat background
    t = json.loads((out / "timings.json").read_text())
    assert len(t["frames"]) == 2 and 0 < t["packing_efficiency"] <= 1
    for k in ("project", "sh", "bin", "raster_fwd", "backward"):
        assert t["frames"][0][k] >= 0
    text = capsys.readouterr().out
    assert "raster_fwd" in text and "backward" in text and "packing efficiency" in text
    # the bundled real capture: an orbit (RGB, depth, alpha), a contact sheet and a turntable GIF
    plant = out / "plant"
    for kind in ("rgb", "depth", "alpha"):
        assert (plant / f"{kind}_01.png").is_file()
    gif = iio.imread(plant / "turntable.gif", index=None)
    assert gif.shape[:3] == (2, 320, 320) and gif.std() > 20
    assert (plant / "overview.png").is_file()
    assert "Marcel Padilla" in text and "gsrender view" in text


# ---------------------------------------------------------------------------------------------
# render


def test_render_orbit_tiny_ply(tmp_path, capsys):
    ply = tmp_path / "tiny.ply"
    save_ply(ply, _tiny_model())
    out = tmp_path / "r"
    rc = main(["render", "--scene", str(ply), "--orbit", "2", "--width", "64", "--height", "48",
               "--out", str(out), "--no-progress"])
    assert rc == 0
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["rgb_00.png", "rgb_01.png"]
    img = iio.imread(out / "rgb_00.png")
    assert img.shape == (48, 64, 3) and img.max() > 0  # the scene is in view
    assert "rendered 2 views" in capsys.readouterr().out


def test_render_cameras_json_with_extras(tmp_path):
    ply = tmp_path / "tiny.ply"
    model = _tiny_model()
    model.features = torch.rand(model.num_gaussians, 5)
    save_ply(ply, model)
    cams = scene_orbit(model.means, 3, 40, 30, 60.0, "+z")
    frames = [{"name": c.name, "width": c.width, "height": c.height, "K": c.K.tolist(),
               "viewmat_w2c_opencv": c.viewmat.tolist()} for c in cams]
    (tmp_path / "cams.json").write_text(json.dumps(frames))
    out = tmp_path / "r"
    rc = main(["render", "--scene", str(ply), "--cameras-json", str(tmp_path / "cams.json"), "--max-views", "2",
               "--what", "rgb,depth,alpha,features", "--mode", "weighted", "--out", str(out), "--no-progress"])
    assert rc == 0
    names = sorted(p.name for p in out.glob("*.png"))
    assert names == sorted(f"{k}_{i:02d}.png" for k in ("rgb", "depth", "alpha", "features_pca") for i in range(2))
    assert iio.imread(out / "depth_01.png").shape == (30, 40, 3)


def test_render_colmap_resized(tmp_path):
    ply = tmp_path / "tiny.ply"
    model = _tiny_model()
    save_ply(ply, model)
    write_colmap_text(tmp_path / "sparse", scene_orbit(model.means, 3, 80, 60, 60.0, "+z"))
    out = tmp_path / "r"
    rc = main(["render", "--scene", str(ply), "--colmap", str(tmp_path / "sparse"), "--width", "40",
               "--what", "rgb,alpha", "--out", str(out), "--no-progress"])
    assert rc == 0
    assert len(list(out.glob("rgb_*.png"))) == 3 and len(list(out.glob("alpha_*.png"))) == 3
    alpha = iio.imread(out / "alpha_00.png")
    assert alpha.shape == (30, 40) and alpha.max() > 0  # height follows the aspect ratio


# COLMAP cameras by lens: (cameras.txt line, or None for a binary OPENCV model written by
# write_colmap_binary; rasterize's lens keywords for the expected image and for one it must differ
# from)
_FISHEYE_K = {"radial_coeffs": torch.tensor([[0.2, -0.05, 0.01, -0.002]])}
_OPENCV = {"radial_coeffs": torch.tensor([[-0.25, 0.05, 0, 0, 0, 0]]),
           "tangential_coeffs": torch.tensor([[2e-3, -1e-3]])}
COLMAP_LENSES = {
    "fisheye": ("1 OPENCV_FISHEYE 64 48 14 14 32 24 0 0 0 0", {"camera_model": "fisheye"},
                {"camera_model": "pinhole"}),
    "fisheye_k1_k4": ("1 OPENCV_FISHEYE 64 48 14 14 32 24 0.2 -0.05 0.01 -0.002",
                      {"camera_model": "fisheye", "with_ut": True, **_FISHEYE_K},
                      {"camera_model": "fisheye", "with_ut": True}),
    "opencv_binary": (None, {"with_ut": True, **_OPENCV}, {"with_ut": True}),
}


@pytest.mark.parametrize("lens", list(COLMAP_LENSES))
def test_render_colmap_lens(tmp_path, lens):
    """A COLMAP model renders through its camera's lens and distortion (the unscented transform
    when it has coefficients): the saved alpha is rasterize's with that lens, not without it."""
    line, want_kw, other_kw = COLMAP_LENSES[lens]
    ply = tmp_path / "tiny.ply"
    save_ply(ply, _tiny_model())
    sparse = tmp_path / "sparse"
    sparse.mkdir()
    # a camera 1.2 units in front of the scene's centre, looking at it (+z): wide angle coverage
    vm = torch.eye(4)[None]
    vm[0, 2, 3] = 1.2
    f = 14.0 if line else 30.0
    K = torch.tensor([[[f, 0, 32], [0, f, 24], [0, 0, 1]]])
    if line:
        (sparse / "cameras.txt").write_text(line + "\n")
        (sparse / "images.txt").write_text("1 1 0 0 0 0 0 1.2 1 view.png\n\n")
    else:
        write_colmap_binary(sparse, [Camera("view.png", 64, 48, K[0], vm[0], distortion={
            k: v[0] for k, v in _OPENCV.items()})])
        assert (sparse / "cameras.bin").is_file()
    out = tmp_path / "r"
    rc = main(["render", "--scene", str(ply), "--colmap", str(sparse), "--what", "alpha",
               "--out", str(out), "--no-progress"])
    assert rc == 0
    saved = torch.from_numpy(iio.imread(out / "alpha_00.png")).double() / 255  # [48, 64]
    m = load_model(ply)
    want, other = (rasterize(m.means, m.quats, m.scales, m.opacities, m.sh, vm, K, 64, 48,
                             sh_degree=m.sh_degree, **kw).alphas[0, ..., 0].double()
                   for kw in (want_kw, other_kw))
    assert float((saved - want).abs().max()) <= 1 / 255 + 1e-6
    assert float((saved - other).abs().max()) > 0.1  # the lens matters here


def test_orbit_cameras_look_at_the_centre():
    means = torch.randn(500, 3, generator=torch.Generator().manual_seed(1)) + torch.tensor([3.0, -1.0, 2.0])
    for up in ("+z", "-y"):
        cams = scene_orbit(means, 4, 80, 60, 50.0, up)
        centre = means.median(0).values
        for c in cams:
            p = c.viewmat[:3, :3] @ centre + c.viewmat[:3, 3]  # camera coordinates of the centre
            assert p[2] > 0 and abs(p[0]) < 1e-3 * p[2] and abs(p[1]) < 1e-3 * p[2]
            # world up shows as image up: its camera-space y (down) is negative
            u = torch.tensor({"+z": [0.0, 0, 1], "-y": [0.0, -1, 0]}[up])
            assert (c.viewmat[:3, :3] @ u)[1] < 0
            assert torch.allclose(c.viewmat[:3, :3] @ c.viewmat[:3, :3].T, torch.eye(3), atol=1e-5)


# ---------------------------------------------------------------------------------------------
# viz


def test_to_uint8_and_save_image(tmp_path):
    img = torch.tensor([[[0.0, 0.5, 1.0], [2.0, -1.0, float("nan")]]])  # [1, 2, 3]
    u8 = viz.to_uint8(img)
    assert u8.dtype == np.uint8 and u8.tolist() == [[[0, 128, 255], [255, 0, 0]]]
    assert viz.to_uint8(np.ones((4, 5, 1), np.float32)).shape == (4, 5)
    p = viz.save_image(tmp_path / "a" / "x.png", np.random.default_rng(0).random((6, 7, 3)))
    assert iio.imread(p).shape == (6, 7, 3)
    with pytest.raises(ValueError, match="img"):
        viz.to_uint8(np.zeros((2, 2, 2)))
    with pytest.raises(TypeError, match="img"):
        viz.to_uint8([[0.0]])


def test_depth_to_color_background_black_near_warm():
    depth = torch.linspace(1, 5, 20).repeat(10, 1)[..., None]  # [10, 20, 1], increasing to the right
    alpha = torch.ones(10, 20, 1)
    alpha[:, :3] = 0.0
    rgb = viz.depth_to_color(depth * alpha, alpha)
    assert rgb.shape == (10, 20, 3) and rgb.dtype == np.float32
    assert (rgb[:, :3] == 0).all() and (rgb[:, 3:].sum(-1) > 0).all()
    assert rgb[0, 3, 0] > rgb[0, 3, 2] and rgb[0, -1, 2] > rgb[0, -1, 0]  # near red, far blue
    assert (viz.depth_to_color(torch.zeros(4, 4), torch.zeros(4, 4)) == 0).all()


def test_feature_pca_deterministic_and_consistent():
    g = torch.Generator().manual_seed(0)
    f = torch.randn(12, 16, 32, generator=g)
    alpha = torch.ones(12, 16)
    alpha[0] = 0
    a = viz.feature_pca(f, alpha)
    assert a.shape == (12, 16, 3) and a.min() >= 0 and a.max() <= 1
    assert (a[0] == 0).all()
    np.testing.assert_array_equal(a, viz.feature_pca(f, alpha))
    basis = viz.pca_basis(f, alpha)
    np.testing.assert_allclose(viz.feature_pca(f, alpha, basis=basis), a, atol=1e-6)
    two = viz.feature_pca(torch.rand(5, 5, 2, generator=g))  # D < 3: third channel empty
    assert (two[..., 2] == 0).all() and two[..., :2].max() > 0
    with pytest.raises(ValueError, match="basis"):
        viz.feature_pca(torch.rand(5, 5, 4), basis=basis)


def test_contact_sheet(tmp_path):
    ims = [[np.zeros((10, 20, 3)), np.ones((10, 20))], [None, np.full((10, 20, 3), 0.5)]]
    p = viz.save_contact_sheet(tmp_path / "s.png", ims, row_labels=["a", "b"], col_labels=["x", "y"])
    assert iio.imread(p).ndim == 3


# ---------------------------------------------------------------------------------------------
# benchmark


def test_benchmark_smoke_writes_json(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cpu_render.py"), "--quick", "--smoke",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    d = json.loads((out / "cpu_render.json").read_text())
    assert d["env"]["config"] == "smoke" and d["sgemm_gflops"]["square"] > 0
    done = [r for r in d["results"] if "skipped" not in r]
    assert {r["scene"] for r in done} >= {"synth"}
    assert any(r["process"] == "subprocess" for r in done)
    for r in done:
        assert r["fwd_ms"] > 0 and r["bwd_ms"] > 0 and r["pairs_computed"] >= r["pairs_contributing"] > 0
        assert r["accum_gflops"] > 0 and r["peak_mb"] >= 0
    assert any(r.get("scalar_speedup") for r in done)
    assert "| scene |" in (out / "cpu_render.md").read_text()
