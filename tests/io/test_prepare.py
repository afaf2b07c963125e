"""`gsrender prepare` (gsrender.sfm.prepare) on photos rendered here: 24 views on an orbit inside a
synthetic room (gsrender.synthetic's indoor layout: textured floor, four walls and ceiling around
five objects; the bundled sample scene, a floor and one wall, leaves half the orbit looking at a
nearly planar floor, which SfM cannot chain) plus 3 photos of random noise that SfM must leave out. One SfM run (module fixture) is checked for the release layout, the manifest,
the registration and the camera centres against the true ones up to a similarity; `--from-model`
rebuilds the layout from its sfm_model without SfM; bad inputs fail with one clear line."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

pycolmap = pytest.importorskip("pycolmap")
cv2 = pytest.importorskip("cv2")

import gsrender
from gsrender.cameras import orbit_cameras
from gsrender.cli.main import main as cli_main
from gsrender.io import load_colmap_cameras, read_colmap_model
from gsrender.sfm import prepare as P
from gsrender.synthetic import make_scene

W, H = 320, 240
N_VIEWS = 24
RADIUS, FOV = 2.8, 65.0  # make_preset's indoor orbit
NOISE = ["zz_noise_0.jpg", "zz_noise_1.jpg", "zz_noise_2.jpg"]  # sorted after the views
SFM_ARGS = ["--max-features", "2048", "--threads", "2", "--no-progress"]


def _views() -> tuple[torch.Tensor, torch.Tensor]:
    """make_preset's indoor orbit (radius 2.8, 1.2 above the objects, 65° field of view), every 15°."""
    return orbit_cameras(N_VIEWS, RADIUS, 1.2, target=(0.0, 0.0, 0.3), width=W, height_px=H, fov_deg=FOV)


def _write_photos(folder: Path) -> torch.Tensor:
    """The views as JPEGs view_XX.jpg plus the noise photos; returns the true viewmats."""
    # 100k Gaussians: textures fine enough for a few hundred SIFT features a view at 320x240
    model = make_scene(100_000, n_objects=5, seed=0, preset="room", sh_degree=0)
    vms, Ks = _views()
    with torch.no_grad():
        out = gsrender.rasterize(model.means, model.quats, model.scales, model.opacities, model.sh,
                                 vms, Ks, W, H, sh_degree=model.sh_degree)
    folder.mkdir(parents=True)
    for i, img in enumerate(out.colors.clamp(0, 1)):
        rgb = (img.numpy() * 255 + 0.5).astype(np.uint8)
        cv2.imwrite(str(folder / f"view_{i:02d}.jpg"), rgb[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 95])
    rng = np.random.default_rng(0)
    for name in NOISE:
        cv2.imwrite(str(folder / name), rng.integers(0, 256, (H, W, 3), dtype=np.uint8))
    return vms


def _run(argv: list[str], capsys) -> tuple[int, str]:
    rc = cli_main(["prepare", *argv])
    return rc, capsys.readouterr().err


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """(photos folder, scene folder, true viewmats, manifest, seconds) of one SfM run."""
    import time

    root = tmp_path_factory.mktemp("prepare")
    photos, scene = root / "photos", root / "scene"
    vms = _write_photos(photos)
    t = time.perf_counter()
    rc = cli_main(["prepare", str(photos), "--out", str(scene), "--min-registered", "0.5", *SFM_ARGS])
    assert rc == 0
    return photos, scene, vms, json.loads((scene / "prepare.json").read_text()), time.perf_counter() - t


def umeyama(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Similarity (s, R, t) minimising |s R src + t - dst|² (Umeyama 1991); src, dst [N,3]."""
    mu_s, mu_d = src.mean(0), dst.mean(0)
    xs, xd = src - mu_s, dst - mu_d
    U, S, Vt = np.linalg.svd(xd.T @ xs / len(src))
    D = np.eye(3)
    D[2, 2] = np.sign(np.linalg.det(U @ Vt))
    R = U @ D @ Vt
    s = float(np.trace(np.diag(S) @ D) / (xs**2).sum(1).mean())
    return s, R, mu_d - s * R @ mu_s


def _centres(viewmats) -> np.ndarray:
    vm = np.asarray(viewmats, dtype=np.float64)
    return -np.einsum("cji,cj->ci", vm[:, :3, :3], vm[:, :3, 3])  # -Rᵀt


@pytest.mark.slow
def test_sfm_registers_the_orbit_and_writes_the_release_layout(prepared):
    photos, scene, vms, m, seconds = prepared
    views = [f"view_{i:02d}.jpg" for i in range(N_VIEWS)]
    assert m["photos"] == sorted(views + NOISE) and m["photo_size"] == [W, H]
    reg = set(m["registered"])
    assert len(reg & set(views)) >= N_VIEWS - 2, m["not_registered"]
    assert not reg & set(NOISE) and set(NOISE) <= set(m["not_registered"])
    assert m["registered_share"] == pytest.approx(len(reg) / len(m["photos"])) and m["n_registered"] == len(reg)
    assert m["mean_reprojection_error_px"] < 1.0 and m["points3D"] > 500 and m["mean_track_length"] > 2
    assert m["pairs_matched"] > 0 and m["from_model"] is None
    assert set(m["seconds"]) == {"features_s", "matching_s", "mapping_s", "undistort_downscale_s"}
    assert m["config"]["max_features"] == 2048 and m["pycolmap"] == pycolmap.__version__

    # the release layout: undistorted PINHOLE cameras, full-size images and their downscales
    cams, _ = read_colmap_model(scene / "sparse" / "0")
    assert {c.model for c in cams.values()} == {"PINHOLE"}
    loaded = load_colmap_cameras(scene / "sparse" / "0", images_dir=scene / "images")
    assert sorted(c.name for c in loaded) == sorted(reg)
    assert all(c.model == "pinhole" and not c.distortion for c in loaded)
    for c in loaded:
        img = cv2.imread(str(c.image_path))
        assert img.shape[:2] == (c.height, c.width)
        # the undistorted size stays near the photos' and the focal near the true one (SfM found it)
        assert abs(c.width - W) <= 0.1 * W and abs(c.height - H) <= 0.1 * H
        f_true = float(_views()[1][0, 0, 0])
        assert float(c.K[0, 0]) == pytest.approx(f_true, rel=0.1)
    for f in (2, 4, 8):
        names = sorted(p.name for p in (scene / f"images_{f}").iterdir())
        assert names == sorted(reg)
        small = cv2.imread(str(scene / f"images_{f}" / loaded[0].name))
        assert small.shape[:2] == (round(loaded[0].height / f), round(loaded[0].width / f))
    assert not list(scene.glob(".prepare-*"))  # the work folder is gone

    # the camera centres agree with the true ones up to a similarity transform
    idx = [int(c.name[5:7]) for c in loaded]
    true = _centres(vms[idx])
    est = _centres(torch.stack([c.viewmat for c in loaded]))
    s, R, t = umeyama(est, true)
    err = np.linalg.norm((s * (R @ est.T)).T + t - true, axis=1)
    assert err.max() < 0.05 * RADIUS, err  # 5% of the orbit's radius

    # sfm_model: the model as --from-model takes it, without 2-D observations or tracks
    kept = scene / "sfm_model"
    lines = [x for x in (kept / "images.txt").read_text().splitlines() if not x.startswith("#")]
    assert len(lines) == 2 * len(reg) and all(x == "" for x in lines[1::2])
    pts = [x for x in (kept / "points3D.txt").read_text().splitlines() if x and not x.startswith("#")]
    assert len(pts) == m["points3D"] and all(len(x.split()) == 8 for x in pts)
    print(f"prepare: {seconds:.1f} s for {len(m['photos'])} photos")


@pytest.mark.slow
def test_from_model_rebuilds_the_layout_without_sfm(prepared, tmp_path, capsys):
    photos, scene, _, m, _ = prepared
    out = tmp_path / "again"
    rc, err = _run([str(photos), "--out", str(out), "--from-model", str(scene / "sfm_model"),
                    "--min-registered", "0.5", "--no-progress"], capsys)
    assert rc == 0, err
    m2 = json.loads((out / "prepare.json").read_text())
    assert m2["from_model"] == str(scene / "sfm_model") and m2["pairs_matched"] is None
    assert set(m2["seconds"]) == {"undistort_downscale_s"}
    assert m2["photos"] == m["photos"] and m2["registered"] == m["registered"]
    assert m2["points3D"] == m["points3D"] and m2["mean_track_length"] is None  # no tracks kept
    assert not (out / "sfm_model").exists()
    a = load_colmap_cameras(scene / "sparse" / "0")
    b = load_colmap_cameras(out / "sparse" / "0")
    assert [c.name for c in a] == [c.name for c in b]
    for ca, cb in zip(a, b):
        assert (ca.width, ca.height) == (cb.width, cb.height)
        torch.testing.assert_close(cb.K, ca.K, atol=1e-3, rtol=1e-4)
        torch.testing.assert_close(cb.viewmat, ca.viewmat, atol=1e-4, rtol=1e-4)
    for f in ("images", "images_2", "images_4", "images_8"):
        assert sorted(p.name for p in (out / f).iterdir()) == sorted(m["registered"])

    # a reconstruction registering fewer than the stated share fails, naming the photos left out
    rc, err = _run([str(photos), "--out", str(tmp_path / "strict"), "--from-model",
                    str(scene / "sfm_model"), "--min-registered", "0.95", "--no-progress"], capsys)
    assert rc == 1 and err.startswith("gsrender prepare: error: SfM registered ")
    assert len(err.strip().splitlines()) == 1 and all(n in err for n in NOISE)


def _photos(folder: Path, sizes: list[tuple[int, int]]) -> Path:
    folder.mkdir()
    rng = np.random.default_rng(1)
    for i, (w, h) in enumerate(sizes):
        cv2.imwrite(str(folder / f"p{i}.png"), rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    return folder


def _error(argv: list[str], capsys) -> str:
    rc, err = _run([*argv, "--no-progress"], capsys)
    assert rc == 1 and err.startswith("gsrender prepare: error: ") and len(err.strip().splitlines()) == 1, err
    return err


def test_bad_photo_folders_fail_with_one_line(tmp_path, capsys):
    d = _photos(tmp_path / "few", [(64, 48)] * 2)
    assert "holds 2 photos" in _error([str(d), "--out", str(tmp_path / "o")], capsys)
    assert "is not a folder" in _error([str(tmp_path / "nope"), "--out", str(tmp_path / "o")], capsys)
    d = _photos(tmp_path / "ok", [(64, 48)] * 3)
    err = _error([str(d), "--out", str(tmp_path / "o"), "--from-model", str(tmp_path / "few")], capsys)
    assert "holds no COLMAP model" in err

    d = _photos(tmp_path / "broken", [(64, 48)] * 3)
    (d / "p1.png").write_bytes(b"not an image")
    err = _error([str(d), "--out", str(tmp_path / "o")], capsys)
    assert str(d / "p1.png") in err and "not a readable image" in err

    d = _photos(tmp_path / "sizes", [(64, 48), (64, 48), (48, 64)])
    err = _error([str(d), "--out", str(tmp_path / "o")], capsys)
    assert "p2.png is 48x64" in err and "64x48" in err

    # the photos inside a folder the scene replaces: refused before anything is deleted
    d = _photos(tmp_path / "scene", [(64, 48)] * 3)
    d.rename(tmp_path / "images")
    (tmp_path / "scene").mkdir()
    (tmp_path / "images").rename(tmp_path / "scene" / "images")
    err = _error([str(tmp_path / "scene" / "images"), "--out", str(tmp_path / "scene")], capsys)
    assert "would replace" in err and len(list((tmp_path / "scene" / "images").iterdir())) == 3


def test_orbit_pairs_wrap_and_keyframes():
    pairs = P.orbit_pairs(20, overlap=3, keyframe_every=6)
    assert all(i < j for i, j in pairs) and len(set(pairs)) == len(pairs)
    assert (0, 1) in pairs and (0, 19) in pairs and (0, 17) in pairs  # wrapped successors
    assert (0, 4) in pairs and (0, 8) not in pairs  # power-of-two offsets below 2**overlap
    assert (6, 18) in pairs and (0, 12) in pairs  # keyframes 0, 6, 12, 18 all against each other
    assert (1, 10) not in pairs


def test_cli_lists_prepare(capsys):
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    assert "prepare" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli_main(["prepare", "--help"])
    assert e.value.code == 0 and "--from-model" in capsys.readouterr().out
