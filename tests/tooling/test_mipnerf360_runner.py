"""benchmarks/mipnerf360.py on a fake Mip-NeRF 360 dataset in the real layout: the ground-truth
images are our own renders, so any convention slip (test split, image folder, intrinsics scale,
model iteration) shows up as a low PSNR; a shifted camera must give a low PSNR too."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import gsrender
from gsrender import synthetic as S
from gsrender.io import Camera, load_ply, save_ply, write_colmap_text

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
runner = pytest.importorskip("benchmarks.mipnerf360")
iio = pytest.importorskip("imageio.v3")
viz = pytest.importorskip("gsrender.viz")

# full-resolution sizes; images_4 (outdoor) and images_2 (indoor) divide them exactly
SCENES = {"garden": (4, 192, 128, 11), "room": (2, 120, 88, 12)}  # factor, W, H, seed
N_IMAGES = 10  # test views: sorted indices 0 and 8


def _full_cameras(W: int, H: int) -> list[Camera]:
    vms, Ks = S.orbit_cameras(N_IMAGES, 4.0, 1.5, width=W, height_px=H)
    cams = []
    for i in range(N_IMAGES):
        K = Ks[i].clone()
        K[1, 1] *= 1.1  # non-square pixels and an off-centre principal point: a wrong scale shows
        K[0, 2] += 0.07 * W
        cams.append(Camera(f"DSC{i:05d}.png", W, H, K, vms[i]))
    return cams


def _render(model, cam: Camera, w: int, h: int) -> torch.Tensor:
    K = cam.K.clone()
    K[0] *= w / cam.width  # the downsampled image's pixels, each axis by its own ratio
    K[1] *= h / cam.height
    # rendered here, not with the runner's own helper, so a slip there cannot cancel out
    out = gsrender.rasterize(model.means, model.quats, model.scales, model.opacities, model.sh,
                             cam.viewmat[None], K[None], w, h, sh_degree=model.sh_degree)
    return out.colors[0].clamp(0, 1)


def _dataset(tmp_path: Path, shift_test_camera: bool = False) -> tuple[Path, Path]:
    data, models = tmp_path / "data", tmp_path / "models"
    for name, (f, W, H, seed) in SCENES.items():
        model = S.make_scene(600, n_objects=3, seed=seed, sh_degree=1)
        ply = models / name / "point_cloud" / "iteration_30000" / "point_cloud.ply"
        ply.parent.mkdir(parents=True)
        save_ply(ply, model)
        model = load_ply(ply)  # the runner renders the PLY's (float32-rounded) values
        if name == "garden":
            # an earlier snapshot that must be ignored in favour of iteration_30000
            old = models / name / "point_cloud" / "iteration_7000" / "point_cloud.ply"
            old.parent.mkdir(parents=True)
            save_ply(old, S.make_scene(600, n_objects=3, seed=99, sh_degree=1))
        else:
            # only a later, non-standard iteration: the runner falls back to the latest one
            ply.parent.rename(ply.parent.with_name("iteration_12000"))
        cams = _full_cameras(W, H)
        for folder, fac in (("images", 1), (f"images_{f}", f)):
            (data / name / folder).mkdir(parents=True)
            for c in cams:
                viz.save_image(data / name / folder / c.name, _render(model, c, W // fac, H // fac))
        if shift_test_camera:
            cams[8].viewmat[0, 3] += 0.3
        # COLMAP lists the images out of name order; the split must follow the sorted names
        write_colmap_text(data / name / "sparse" / "0", cams[::-1])
    return data, models


def _run(tmp_path: Path, data: Path, models: Path) -> dict:
    out = tmp_path / "out"
    rc = runner.main(["--data", str(data), "--models", str(models), "--out", str(out), "--warmup", "0",
                      "--no-progress", "--device", "cpu"])
    assert rc == 0
    assert (out / "results.md").is_file()
    return json.loads((out / "results.json").read_text())


def test_runner_on_fake_dataset(tmp_path):
    data, models = _dataset(tmp_path)
    res = _run(tmp_path, data, models)
    rows = {r["scene"]: r for r in res["scenes"]}
    assert set(rows) == {"garden", "room"} and res["source"] == "mipnerf360"
    for name, (f, W, H, _) in SCENES.items():
        r = rows[name]
        assert r["images"] == f"images_{f}" and (r["width"], r["height"]) == (W // f, H // f)
        assert [v["name"] for v in r["views"]] == ["DSC00000.png", "DSC00008.png"]
        # only PNG quantisation separates the render from its ground truth (~59 dB)
        assert r["psnr"] > 50.0, (name, r["psnr"])
        assert r["ssim"] > 0.999 and r["lpips"] is None and r["fps"] > 0
        assert r["n_gaussians"] == 600 and r["sh_degree"] == 1
    assert rows["garden"]["ply"].endswith("iteration_30000/point_cloud.ply")
    assert rows["room"]["ply"].endswith("iteration_12000/point_cloud.ply")
    means = res["means"]
    assert means["outdoor"]["n_scenes"] == 1 and means["indoor"]["n_scenes"] == 1
    assert means["all"]["psnr"] == pytest.approx((rows["garden"]["psnr"] + rows["room"]["psnr"]) / 2)
    assert means["all"]["lpips"] is None and res["settings"]["lpips"] == "n/a"
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| garden |" in md and "| outdoor |" in md and "n/a" in md
    assert {"device", "torch", "commit"} <= set(res["env"])


def test_shifted_camera_gives_low_psnr(tmp_path):
    data, models = _dataset(tmp_path, shift_test_camera=True)
    res = _run(tmp_path, data, models)
    for r in res["scenes"]:
        v0, v8 = r["views"]
        assert v0["psnr"] > 50.0 and v8["psnr"] < 30.0, (r["scene"], v0["psnr"], v8["psnr"])


def test_synthetic_smoke(tmp_path):
    out = tmp_path / "syn"
    assert runner.main(["--synthetic", "--smoke", "--scenes", "garden,room", "--out", str(out),
                        "--no-progress", "--device", "cpu"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["source"] == "synthetic" and all(r["source"] == "synthetic" for r in res["scenes"])
    assert {r["kind"] for r in res["scenes"]} == {"outdoor", "indoor"}
    # the float32 matrix path against the float64 scalar kernel: arithmetic differences only
    assert all(r["psnr"] > 60.0 for r in res["scenes"])
    assert "synthetic" in (out / "results.md").read_text()


def test_bad_arguments(tmp_path):
    assert runner.main(["--data", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert runner.main(["--synthetic", "--scenes", "nope", "--out", str(tmp_path / "o")]) == 2


# ---------------------------------------------------------------------------------------------
# a scene made by `gsrender prepare`: prepare.json lists every photo, SfM registered all but one


PHOTOS = [f"P{i:02d}.png" for i in range(18)]
UNREGISTERED = "P03.png"  # listed in the manifest, absent from sparse/0 and images/


def _prepared(tmp_path: Path) -> tuple[Path, Path, torch.Tensor]:
    """data/bonsai in `gsrender prepare`'s layout (images, images_2, sparse/0, prepare.json) and
    the model in the layout `gsrender train` writes (models/bonsai/point_cloud/iteration_7000/)."""
    W, H = 120, 88
    data, models = tmp_path / "data", tmp_path / "models"
    model = S.make_scene(600, n_objects=3, seed=5, sh_degree=1)
    ply = models / "bonsai" / "point_cloud" / "iteration_7000" / "point_cloud.ply"
    ply.parent.mkdir(parents=True)
    save_ply(ply, model)
    model = load_ply(ply)
    vms, Ks = S.orbit_cameras(len(PHOTOS), 4.0, 1.5, width=W, height_px=H)
    cams = [Camera(n, W, H, Ks[i], vms[i]) for i, n in enumerate(PHOTOS) if n != UNREGISTERED]
    scene = data / "bonsai"
    for folder, fac in (("images", 1), ("images_2", 2)):
        for c in cams:
            viz.save_image(scene / folder / c.name, _render(model, c, W // fac, H // fac))
    write_colmap_text(scene / "sparse" / "0", cams)
    registered = [c.name for c in cams]
    (scene / "prepare.json").write_text(json.dumps({
        "photos": PHOTOS, "registered": registered, "not_registered": [UNREGISTERED]}))
    return data, models, model


def test_prepared_scene_holds_out_every_8th_photo_of_the_manifest(tmp_path):
    data, models, _ = _prepared(tmp_path)
    out = tmp_path / "out"
    assert runner.main(["--data", str(data), "--models", str(models), "--scenes", "bonsai", "--out", str(out),
                        "--warmup", "0", "--no-progress", "--device", "cpu"]) == 0
    res = json.loads((out / "results.json").read_text())
    (r,) = res["scenes"]
    # indices 0, 8, 16 among all 18 photos; counting only the registered ones would give
    # P00, P09, P17
    assert [v["name"] for v in r["views"]] == ["P00.png", "P08.png", "P16.png"]
    assert r["protocol"] == "prepare.json" and r["photos"] == {"photos": 18, "registered": 17}
    # a prepared scene is evaluated on its full-size images, not the release's images_2 for bonsai
    assert r["images"] == "images" and (r["width"], r["height"]) == (120, 88)
    # renders rounded to 8 bits as the PNG photos were: (nearly) identical, far above the ~59 dB
    # that float renders against 8-bit photos give
    assert r["quantized_8bit"] and all(v["psnr"] > 65.0 for v in r["views"]), r["views"]
    assert r["ply"].endswith("bonsai/point_cloud/iteration_7000/point_cloud.ply") and r["fps"] > 0
    strip = iio.imread(r["strip"])
    assert Path(r["strip"]) == out / "bonsai_strip.png" and strip.shape[:2] == (2 * 88, 3 * 120)
    md = (out / "results.md").read_text()
    assert "| P08.png |" in md and "of the 18 photos of prepare.json" in md

    # the trainer's split is the same rule (gsrender.io.mipnerf360.held_out)
    from gsrender.train.data import load_colmap_dataset

    ds = load_colmap_dataset(data / "bonsai")
    assert [v.name for v in ds.test] == ["P00.png", "P08.png", "P16.png"] and len(ds.train) == 14

    # --images picks the folder; the intrinsics follow its size
    out2 = tmp_path / "out2"
    assert runner.main(["--data", str(data), "--models", str(models), "--scenes", "bonsai", "--images",
                        "images_2", "--out", str(out2), "--warmup", "0", "--no-progress", "--device", "cpu"]) == 0
    (r2,) = json.loads((out2 / "results.json").read_text())["scenes"]
    assert r2["images"] == "images_2" and (r2["width"], r2["height"]) == (60, 44)
    assert all(v["psnr"] > 50.0 for v in r2["views"])
    assert runner.main(["--data", str(data), "--models", str(models), "--scenes", "bonsai", "--images",
                        "images_8", "--out", str(out2), "--no-progress"]) == 2  # absent folder


def test_held_out_rule():
    from gsrender.io.mipnerf360 import held_out

    names = [f"{i:02d}" for i in range(17)]
    assert [i for i, t in enumerate(held_out(names)) if t] == [0, 8, 16]
    assert held_out(["a"]) == [False]
    photos = sorted(names + ["00b", "07b"])  # two photos SfM did not register
    assert [n for n, t in zip(names, held_out(names, 8, photos)) if t] == ["00", "07", "14"]
    with pytest.raises(ValueError, match="does not list"):
        held_out(["zz"], 8, photos)
