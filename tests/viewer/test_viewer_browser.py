"""The viewer in a real browser: headless Chromium (Debian's chromium + chromium-driver, driven by
selenium) opens `gsrender view`'s page for the bundled plant capture, the test moves the camera
to an orbit view, waits for the full-resolution frame, and checks the canvas shows the scene:
not blank, and the same picture as an offline render of that camera. Skips without a browser
(`make test` installs one when it runs as root)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gsrender import viz
from gsrender.cameras import scene_orbit
from gsrender.cli.common import load_model
from gsrender.turntable import plant_path
from gsrender.viewer.browser import find_chromium
from gsrender.viewer.browser import psnr as _psnr
from gsrender.views import render_view

pytest.importorskip("viser")
pytestmark = [
    pytest.mark.slow,  # a headless browser (make test-fast leaves it out)
    pytest.mark.skipif(find_chromium() is None, reason="no headless Chromium (chromium, chromedriver, "
                       "selenium); `make test` installs them as root"),
    pytest.mark.skipif(not plant_path().is_file(), reason="data/plant/plant.splat is missing"),
]


def test_viewer_page_shows_the_plant_like_an_offline_render(tmp_path):
    from gsrender.viewer.app import Viewer
    from gsrender.viewer.browser import Browser, drawn_canvas, free_port, open_page

    model = load_model(plant_path())
    viewer = Viewer(model, port=free_port(), up="-y")
    browser = Browser(640, 520)
    try:
        w, h = open_page(browser, viewer)
        assert 100 < w <= 1024 and 100 < h <= 1024  # within max_side: the full frame is canvas-sized
        cams = scene_orbit(model.means, 8, w, h, 50.0, "-y", 20.0)
        cam, other = cams[1], cams[3]
        with torch.no_grad():
            offline, wrong = (viz.to_uint8(render_view(model, c, torch.device("cpu"), features=False).colors[0])
                              for c in (cam, other))
        viewer.set_camera(cam)
        shown = viewer.wait_frame(timeout=120, like=cam)
        assert (shown.camera.width, shown.camera.height) == (w, h)
        shot, psnr = drawn_canvas(browser, offline, PSNR_BAR)
        page = browser.text()
        viz.save_image(tmp_path / "canvas.png", shot)
    finally:
        browser.close()
        viewer.close()
    assert "113,648 Gaussians" in page and "FPS" in page  # the stats line on screen
    assert shot.shape[:2] == (h, w)
    # plausible: a picture, with the plant (not the black background behind it) over a good part of it
    assert shot.std() > 20 and (shot.max(-1) > 40).mean() > 0.05
    # the same view as the offline render: JPEG (quality 90) and the browser's texture sampling
    # cost little (43.5 dB, correlation 0.9996 measured here) ...
    corr = np.corrcoef(shot.reshape(-1).astype(np.float64), offline.reshape(-1).astype(np.float64))[0, 1]
    assert psnr > PSNR_BAR and corr > 0.99, (psnr, corr)
    # ... and not just any plant picture: another orbit view matches far worse (~16 dB)
    assert _psnr(shot, wrong) < psnr - 10.0


PSNR_BAR = 30.0
