"""gsrender.viewer without a browser: viser camera conventions, progressive quality, the render
modes, the server answering on loopback, `gsrender view` errors and the `train --view` hook."""
from __future__ import annotations

import json
import math
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

from gsrender import viz
from gsrender.cameras import load_cameras_json, scene_orbit
from gsrender.cli.main import main
from gsrender.io import load_ply
from gsrender.io.paths import sample_dir
from gsrender.viewer.camera import camera_from_viser, fit_size, up_from_cameras
from gsrender.viewer.frames import FAR_DEPTH, FrameRenderer, available_modes, label_palette
from gsrender.viewer.progressive import FULL, LOW, Progressive
from gsrender.views import render_view

SAMPLE = sample_dir() / "scene.ply"
needs_sample = pytest.mark.skipif(not SAMPLE.is_file(), reason="data/sample is missing")


def _project(cam, p) -> np.ndarray:
    """Pixel (u, v) of world point p through cam (pinhole, OpenCV)."""
    x = cam.viewmat.double() @ torch.tensor([*p, 1.0], dtype=torch.float64)
    uv = cam.K.double() @ (x[:3] / x[2])
    return uv[:2].numpy()


# ---------------------------------------------------------------------------------- cameras


def test_camera_from_viser_follows_opencv_axes():
    """viser's pose is camera-to-world with x right, y down, z forward: a point straight ahead
    lands on the image centre, one to the camera's right on the right half, one above it
    (−y) in the upper half, and the vertical field of view spans the image height."""
    tf = pytest.importorskip("viser.transforms")
    R = tf.SO3.from_rpy_radians(0.3, -0.7, 1.1)
    pos = np.array([0.5, -1.0, 2.0])
    Rm = R.as_matrix()
    fov_y = math.radians(50)
    cam = camera_from_viser(R.wxyz, pos, fov_y, 320, 200)
    np.testing.assert_allclose(_project(cam, pos + 3 * Rm[:, 2]), [160, 100], atol=1e-3)
    assert _project(cam, pos + 3 * Rm[:, 2] + 0.5 * Rm[:, 0])[0] > 160
    assert _project(cam, pos + 3 * Rm[:, 2] - 0.5 * Rm[:, 1])[1] < 100
    edge = pos + Rm[:, 2] + math.tan(fov_y / 2) * Rm[:, 1]  # bottom edge of the frustum
    np.testing.assert_allclose(_project(cam, edge)[1], 200, atol=1e-3)


def test_viser_pose_inverts_camera_from_viser():
    pytest.importorskip("viser")
    from gsrender.viewer.camera import viser_pose

    cam = scene_orbit(torch.randn(500, 3, generator=torch.Generator().manual_seed(0)), 5, 160, 120,
                      70.0, "-y")[3]
    wxyz, pos, fov_y, aspect = viser_pose(cam)
    back = camera_from_viser(wxyz, pos, fov_y, 160, 120)
    assert aspect == pytest.approx(160 / 120)
    torch.testing.assert_close(back.viewmat, cam.viewmat, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(back.K, cam.K, atol=1e-3, rtol=1e-5)


def test_camera_from_viser_rejects_bad_fov():
    with pytest.raises(ValueError, match="fov_y"):
        camera_from_viser((1, 0, 0, 0), (0, 0, 0), 0.0, 10, 10)


def test_fit_size_keeps_aspect_and_caps_the_long_side():
    assert fit_size(1280, 720, 640) == (640, 360)
    assert fit_size(300, 200, 1024) == (300, 200)  # never upscales
    assert fit_size(100, 1000, 50) == (5, 50)
    with pytest.raises(ValueError, match="width/height"):
        fit_size(0, 10, 10)


def test_up_from_cameras_is_the_cameras_up():
    means = torch.randn(300, 3, generator=torch.Generator().manual_seed(1))
    for up in ("+z", "-y", "+x"):
        assert up_from_cameras(scene_orbit(means, 6, 64, 48, 60.0, up, 25.0)) == up


# ---------------------------------------------------------------------------------- progressive


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_progressive_low_while_moving_full_when_still():
    clock = _Clock()
    p = Progressive(still_s=0.25, clock=clock)
    assert p.next() == (0, FULL)  # nothing shown yet, camera at rest
    p.shown(0, FULL)
    assert p.next() is None
    p.moved()  # the user drags
    assert p.next() == (1, LOW)
    p.shown(1, LOW)
    assert p.next() is None  # low frame of this view up; camera may still move
    clock.t += 0.1
    p.moved()
    assert p.next() == (2, LOW)
    p.shown(2, LOW)
    assert p.seconds_to_still() == pytest.approx(0.25)
    clock.t += 0.3  # at rest now
    assert p.next() == (2, FULL)
    p.shown(2, FULL)
    assert p.next() is None
    p.changed()  # mode / model change without motion: straight to full resolution
    assert p.next() == (3, FULL)


# ---------------------------------------------------------------------------------- render modes


@needs_sample
def test_frame_modes_on_the_labelled_sample():
    model = load_ply(SAMPLE)
    fr = FrameRenderer(model, torch.device("cpu"))
    assert fr.modes == ["rgb", "depth", "alpha", "features", "labels"]
    cam = load_cameras_json(sample_dir() / "cameras.json")[0].resized(160, 120)  # sees every object
    ref = render_view(model, cam, torch.device("cpu"))
    rgb = fr.render(cam, "rgb")
    np.testing.assert_array_equal(rgb.image, viz.to_uint8(ref.colors[0]))
    a = ref.alphas[0, ..., 0].numpy()
    ok = a >= viz.ALPHA_MIN
    np.testing.assert_allclose(rgb.depth[ok], ref.depths[0, ..., 0].numpy()[ok] / a[ok], rtol=1e-5, atol=1e-5)
    assert (rgb.depth[~ok] == FAR_DEPTH).all()
    assert fr.render(cam, "alpha").image.shape == (120, 160, 3)
    depth = fr.render(cam, "depth").image
    assert depth[ok].std() > 10 and (depth[~ok] == 0).all()
    f1, f2 = fr.render(cam, "features").image, fr.render(cam, "features").image
    np.testing.assert_array_equal(f1, f2)  # one PCA basis for every frame
    labels = fr.render(cam, "labels").image
    pal = (label_palette(6) * 255 + 0.5).astype(np.uint8)
    # each object's centre pixel shows that object's colour (ids 0..5 map to palette 0..5)
    objects = json.loads((sample_dir() / "objects.json").read_text())
    hits = 0
    for o in objects:
        u, v = _project(cam, o["center"])
        hits += int(np.array_equal(labels[int(v), int(u)], pal[o["object_id"]]))
    assert hits >= len(objects) - 1  # one may hide behind another from this side
    with pytest.raises(ValueError, match="mode"):
        FrameRenderer(model.subset(torch.arange(100)), torch.device("cpu")).render(cam, "nope")


def test_plain_scene_has_only_the_basic_modes():
    from gsrender.scene import GaussianModel, rgb_to_sh

    m = GaussianModel(means=torch.zeros(4, 3), quats=torch.tensor([[1.0, 0, 0, 0]]).repeat(4, 1),
                      scales=torch.full((4, 3), 0.1), opacities=torch.full((4,), 0.5),
                      sh=rgb_to_sh(torch.rand(4, 3))[:, None])
    assert available_modes(m) == ["rgb", "depth", "alpha"]


# ---------------------------------------------------------------------------------- server


def _tiny_model():
    from gsrender.scene import GaussianModel, rgb_to_sh

    g = torch.Generator().manual_seed(0)
    n = 200
    return GaussianModel(means=torch.randn(n, 3, generator=g), quats=torch.randn(n, 4, generator=g),
                         scales=torch.rand(n, 3, generator=g) * 0.1 + 0.02,
                         opacities=torch.rand(n, generator=g) * 0.5 + 0.4,
                         sh=rgb_to_sh(torch.rand(n, 3, generator=g))[:, None])


def test_viewer_serves_its_page_on_loopback():
    pytest.importorskip("viser")
    from gsrender.viewer.app import Viewer
    from gsrender.viewer.browser import free_port

    v = Viewer(_tiny_model(), port=free_port())
    try:
        assert v.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(v.url + "/", timeout=30) as r:  # the bundled client, offline
            assert r.status == 200 and b"<html" in r.read(4096).lower()
    finally:
        v.close()


def test_viewer_sends_no_frame_to_a_client_gone_while_it_rendered():
    """A tab closed during a render: the frame is dropped, not sent (viser warns on every
    message queued for a closed connection); a connected client gets its frame."""
    pytest.importorskip("viser")
    from types import SimpleNamespace

    from gsrender.viewer.app import Viewer, _Client
    from gsrender.viewer.browser import free_port

    sent = []

    def handle(client_id):
        cam = SimpleNamespace(image_width=64, image_height=48, wxyz=np.array([1.0, 0, 0, 0]),
                              position=np.array([0.0, 0, -4]), fov=1.0)
        return SimpleNamespace(
            client_id=client_id, camera=cam,
            gui=SimpleNamespace(add_markdown=lambda text, order: SimpleNamespace(content=text)),
            scene=SimpleNamespace(set_background_image=lambda image, **kw: sent.append(client_id)))

    v = Viewer(_tiny_model(), port=free_port())
    try:
        v._stop.set(), v._wake.set()  # the render loop stopped: only the calls below render
        v._thread.join(timeout=30)
        here, gone = _Client(handle(1), v.still_s), _Client(handle(2), v.still_s)
        with v._lock:
            v._clients[1] = here  # client 2 connected once, then disconnected
        v._render(gone, 1, FULL)
        assert sent == [] and gone.shown is None
        v._render(here, 1, FULL)
        assert sent == [1] and here.shown is not None
    finally:
        v.close()


def test_view_command_serves_until_interrupted(tmp_path):
    """`gsrender view SCENE --colmap DIR` as a user runs it: prints the loopback URL, serves the
    page with the COLMAP cameras as frustums, and exits cleanly on Ctrl+C (SIGINT)."""
    pytest.importorskip("viser")
    import signal
    import subprocess
    import sys

    from gsrender.io import save_ply, write_colmap_text
    from gsrender.viewer.browser import free_port

    model = _tiny_model()
    save_ply(tmp_path / "tiny.ply", model)
    write_colmap_text(tmp_path / "sparse", scene_orbit(model.means, 3, 80, 60, 60.0, "+z"))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gsrender", "view", str(tmp_path / "tiny.ply"),
                             "--colmap", str(tmp_path / "sparse"), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    try:
        lines = []
        for line in proc.stdout:  # until the URL line
            lines.append(line)
            if "open http" in line:
                break
        text = "".join(lines)
        assert f"http://127.0.0.1:{port}" in text and "200 Gaussians" in text and "3 cameras" in text
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
            assert r.status == 200
        proc.send_signal(signal.SIGINT)
        # communicate() keeps reading the output while it waits, so the viewer can never block
        # on a full pipe while shutting down; the output explains a failure
        rest, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, text + rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_viewer_shows_cameras_as_frustums():
    pytest.importorskip("viser")
    from gsrender.viewer.app import Viewer
    from gsrender.viewer.browser import free_port

    model = _tiny_model()
    cams = scene_orbit(model.means, 4, 80, 60, 60.0, "+z")
    v = Viewer(model, port=free_port(), cameras=cams)
    try:
        assert len(v.frustums) == 4
        for h, cam in zip(v.frustums, cams):
            eye = -cam.viewmat[:3, :3].double().T @ cam.viewmat[:3, 3].double()
            np.testing.assert_allclose(h.position, eye.numpy(), atol=1e-5)
    finally:
        v.close()


def test_view_command_errors(tmp_path, capsys):
    pytest.importorskip("viser")  # (without it the command stops first, saying so: test_view_cli.py)
    assert main(["view", str(tmp_path / "missing.ply")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert main(["view", str(tmp_path / "x.ply"), "--port", "0"]) == 1
    assert "--port" in capsys.readouterr().err


def test_train_view_hook_shows_the_model_being_trained(tmp_path):
    pytest.importorskip("viser")
    from gsrender.train.data import synthetic_dataset
    from gsrender.train.run import build_parser, train
    from gsrender.viewer.browser import free_port
    from gsrender.viewer.training import TrainingView

    args = build_parser().parse_args(["--synthetic", "--steps", "4", "--synthetic-gaussians", "300",
                                      "--synthetic-views", "4", "--width", "32", "--height", "24",
                                      "--eval-every", "0", "--snapshot-every", "0", "--no-progress",
                                      "--out", str(tmp_path)])
    data = synthetic_dataset(300, 4, 32, 24, every=args.hold, seed=0, device=torch.device("cpu"))
    hook = TrainingView(data.train, port=free_port(), refresh_s=0.0)
    try:
        rep = train(args, data, Path(tmp_path), on_step=hook)
        v = hook.viewer
        assert v is not None and "step 4/4" in v.status
        assert v.frames.model.num_gaussians == rep["gaussians_final"]
        trained = load_ply(rep["ply"])
        torch.testing.assert_close(v.frames.model.means, trained.means)  # the final parameters
        assert len(hook.cameras) == len(data.train)
    finally:
        if hook.viewer is not None:
            hook.viewer.close()


def test_train_view_without_viser_fails_before_training(monkeypatch):
    import importlib.util

    from gsrender.viewer.training import TrainingView

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "viser" else real(n, *a))
    with pytest.raises(ValueError, match="viser"):
        TrainingView([])

