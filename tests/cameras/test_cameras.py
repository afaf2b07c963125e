"""gsrender.cameras: the one camera-JSON reader (both layouts, every command), orbits, look-at."""
from __future__ import annotations

import json
import math

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from gsrender.cameras import (
    cameras_from_json,
    cameras_to_json,
    intrinsics,
    load_cameras_json,
    look_at,
    orbit_cameras,
    save_cameras_json,
    scene_orbit,
)
from gsrender.cli.main import main
from gsrender.io import save_ply
from gsrender.voda import removal3d as R


def _frames_layout(vms, Ks, W, H, names) -> dict:
    """The snowmiku cameras_small.json layout of the same cameras (file = images/<name>.png)."""
    return {"frames": [{"file": f"images/{nm}.png", "width": W, "height": H, "K": k.tolist(),
                        "viewmat_w2c_opencv": vm.tolist()} for nm, k, vm in zip(names, Ks, vms)]}


def test_both_layouts_read_alike(tmp_path):
    vms, Ks = orbit_cameras(3, 2.0, 0.7, width=40, height_px=30, fov_deg=50.0)
    names = ["a", "b", "c"]
    (tmp_path / "list.json").write_text(cameras_to_json(vms, Ks, 40, 30, names))
    (tmp_path / "frames.json").write_text(json.dumps(_frames_layout(vms, Ks, 40, 30, names)))
    a = load_cameras_json(tmp_path / "list.json")
    b = load_cameras_json(tmp_path / "frames.json")
    assert [c.name for c in a] == names and [c.name for c in b] == [f"{n}.png" for n in names]
    assert all(c.image_path is None for c in a)
    assert [c.image_path for c in b] == [tmp_path / "images" / f"{n}.png" for n in names]
    for x, y in zip(a, b):
        assert (x.width, x.height) == (y.width, y.height) == (40, 30)
        torch.testing.assert_close(x.K, y.K, atol=1e-5, rtol=0)
        torch.testing.assert_close(x.viewmat, y.viewmat, atol=1e-6, rtol=0)
    v2, k2, w, h, nm = cameras_from_json(tmp_path / "frames.json")
    torch.testing.assert_close(v2, vms, atol=1e-6, rtol=0)
    torch.testing.assert_close(k2, Ks, atol=1e-5, rtol=0)
    assert (w, h) == (40, 30) and nm == [f"{n}.png" for n in names]
    save_cameras_json(tmp_path / "again.json", b)
    assert [c.name for c in load_cameras_json(tmp_path / "again.json")] == [c.name for c in b]


@pytest.mark.parametrize("content, match", [
    ("not json", "not valid JSON"),
    ("[]", "non-empty"),
    ('{"frames": 3}', "non-empty"),
    ('[{"width": 4, "height": 3, "K": [[1, 0, 2], [0, 1, 1.5], [0, 0, 1]]}]', "viewmat_w2c_opencv"),
    ('[{"width": 0, "height": 3}]', "width"),
    ('[{"width": 4, "height": 3, "K": [[1, 0], [0, 1]], "viewmat_w2c_opencv": []}]', "'K' must be"),
    ('[5]', "camera 0 is not an object"),
])
def test_bad_camera_json_names_the_problem(tmp_path, content, match):
    p = tmp_path / "c.json"
    p.write_text(content)
    with pytest.raises(ValueError, match=match):
        load_cameras_json(p)
    with pytest.raises(ValueError, match="no such file"):
        load_cameras_json(tmp_path / "missing.json")


def test_orbit_conventions():
    # +z up: camera 0 of orbit_cameras on +x; scene_orbit's camera 0 on +y; both look at the target
    vms, _ = orbit_cameras(4, 3.0, 1.0, target=(1.0, 2.0, 0.5))
    centres = -(vms[:, :3, :3].transpose(1, 2) @ vms[:, :3, 3:])[..., 0]
    torch.testing.assert_close(centres[0], torch.tensor([4.0, 2.0, 1.5]), atol=1e-5, rtol=0)
    torch.testing.assert_close(centres[1], torch.tensor([1.0, 5.0, 1.5]), atol=1e-5, rtol=0)
    means = torch.randn(400, 3, generator=torch.Generator().manual_seed(0))
    cams = scene_orbit(means, 4, 64, 48, 60.0, "+z", elevation_deg=0.0)
    c0 = -(cams[0].viewmat[:3, :3].T @ cams[0].viewmat[:3, 3])
    centre = means.double().median(0).values.float()
    d = c0 - centre
    assert d[1] > 0 and abs(d[0]) < 1e-4 * d.norm() and abs(d[2]) < 1e-4 * d.norm()
    # look_at: one camera or a batch, proper rotations, the target straight ahead
    vm = look_at([0.0, -3.0, 1.0], [0.0, 0.0, 0.0], "+z")
    assert vm.shape == (4, 4)
    R3 = vm[:3, :3]
    torch.testing.assert_close(R3 @ R3.T, torch.eye(3), atol=1e-6, rtol=0)
    p = vm[:3, :3] @ torch.zeros(3) + vm[:3, 3]
    assert abs(p[0]) < 1e-6 and abs(p[1]) < 1e-6 and p[2] > 0
    assert look_at(torch.zeros(2, 3) + torch.tensor([0.0, 0.0, 5.0]), torch.zeros(3)).shape == (2, 4, 4)
    K = intrinsics(64, 48, 90.0)
    assert math.isclose(float(K[0, 0]), 32.0, rel_tol=1e-6) and K[0, 2] == 32 and K[1, 2] == 24
    with pytest.raises(ValueError, match="up"):
        look_at([1.0, 0, 0], [0.0, 0, 0], "up")


def test_voda_reads_the_frames_layout(tmp_path):
    # `voda --cameras-json` reads the file `loc` and `render` read (it rejected this layout once)
    model = R.layered_object("sphere", (0.0, 0.0, 0.0), 0.8, (0.8, 0.2, 0.2), 1, 300, seed=0)
    vm, K = orbit_cameras(2, 2.0, 0.5, width=32, height_px=24, fov_deg=45.0)
    labels, _ = R.instance_masks(model, 1, vm, K, 32, 24)
    save_ply(tmp_path / "scene.ply", model)
    names = ["v0", "v1"]
    (tmp_path / "cams.json").write_text(json.dumps(_frames_layout(vm, K, 32, 24, names)))
    (tmp_path / "labels").mkdir()
    for nm, lab in zip(names, labels):
        iio.imwrite(tmp_path / "labels" / f"{nm}.png", lab.numpy().astype(np.uint8))
    rc = main(["voda", "--scene", str(tmp_path / "scene.ply"), "--cameras-json", str(tmp_path / "cams.json"),
               "--labels", str(tmp_path / "labels"), "--iters", "2", "--out", str(tmp_path / "out")])
    assert rc == 0
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["n_gaussians"] == model.num_gaussians


def test_viewer_and_kernel_cases_use_these_intrinsics():
    # the K viewer/camera.py and testing/make_cases.py built themselves before they called
    # pinhole / intrinsics: the same numbers
    from gsrender.testing.make_cases import Scene
    from gsrender.viewer.camera import camera_from_viser

    for W, H, fov_y in ((640, 480, 0.9), (37, 21, 1.3), (1, 1, 3.0)):
        f = 0.5 * H / math.tan(0.5 * fov_y)
        old = torch.tensor([[f, 0.0, W / 2], [0.0, f, H / 2], [0.0, 0.0, 1.0]])
        assert torch.equal(camera_from_viser([1.0, 0, 0, 0], [0.0, 0, 0], fov_y, W, H).K, old)
    for name, dtype in (("tiny", torch.float64), ("small", torch.float32)):
        s = Scene(name, dtype)
        f = 0.5 * s.W / np.tan(np.radians(60.0) / 2)
        old = torch.tensor([[f, 0, s.W / 2], [0, f, s.H / 2], [0, 0, 1]], dtype=torch.float64)
        # math.tan here, np.tan before: equal up to the last bit of a float64
        torch.testing.assert_close(s.Ks, old.repeat(s.C, 1, 1).to(dtype), rtol=1e-15, atol=0)
