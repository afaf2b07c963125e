"""The real-scene pipeline's quick path on the Mip-NeRF 360 bonsai photos (../shared/data, skipped
without them): the committed SfM model → the prepared scene → a short `--preset 3dgs` training at
a quarter of the size → the runner's held-out evaluation, with the protocol's invariants."""
import json
from pathlib import Path

import pytest

from gsrender.io import paths
from gsrender.train.data import load_colmap_dataset

ROOT = Path(__file__).resolve().parents[2]
PHOTOS = paths.data_dir() / "bonsai" / "images"
MODEL = ROOT / "data" / "scenes" / "bonsai" / "sfm_model"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not PHOTOS.is_dir(), reason="../shared/data/bonsai absent"),
              pytest.mark.skipif(not MODEL.is_dir(), reason="no committed bonsai SfM model")]


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    pytest.importorskip("pycolmap")
    from gsrender.sfm.prepare import PrepareConfig, prepare

    out = tmp_path_factory.mktemp("real") / "bonsai"
    prepare(PHOTOS, out, PrepareConfig(downscales=(4,)), from_model=MODEL, quiet=True)
    return out


def test_prepared_scene_from_the_committed_model(scene):
    m = json.loads((scene / "prepare.json").read_text())
    assert len(m["photos"]) == 292 and m["photo_size"] == [800, 533]
    assert m["registered_share"] >= 0.9 and m["from_model"] == str(MODEL)
    assert len(list((scene / "images").iterdir())) == len(m["registered"])
    assert len(list((scene / "images_4").iterdir())) == len(m["registered"])
    # the Mip-NeRF 360 split counts every 8th of all 292 photos, registered or not
    data = load_colmap_dataset(scene, images="images_4")
    held = {v.name for v in data.test}
    expected = {n for i, n in enumerate(m["photos"]) if i % 8 == 0} & set(m["registered"])
    assert held == expected and len(data.train) + len(data.test) == len(m["registered"])


def test_short_training_and_the_runner(scene, tmp_path):
    from benchmarks import mipnerf360
    from gsrender.train.run import main as train_main

    models = tmp_path / "models"
    assert train_main(["--colmap", str(scene), "--images", "images_4", "--preset", "3dgs",
                       "--steps", "40", "--eval-every", "0", "--snapshot-every", "0",
                       "--no-progress", "--out", str(models / "bonsai")]) == 0
    rep = json.loads((models / "bonsai" / "results.json").read_text())
    assert rep["config"]["background"] == "black" and rep["config"]["lr_scale"] == 1.0
    assert Path(rep["ply"]).is_file() and (models / "bonsai" / "cameras.json").is_file()
    out = tmp_path / "eval"
    assert mipnerf360.main(["--data", str(scene.parent), "--models", str(models), "--scenes", "bonsai",
                            "--images", "images_4", "--max-views", "2", "--no-progress",
                            "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    row = res["scenes"][0]
    assert row["scene"] == "bonsai" and row["n_views"] == 2 and row["psnr"] > 10
