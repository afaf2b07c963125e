"""docs/images/viewer.png: `gsrender view` of the bundled plant in headless Chromium, GUI and all.

    python scripts/viewer_screenshot.py [--out docs/images/viewer.png] [--mode "RGB"]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch

from gsrender import viz
from gsrender.cameras import scene_orbit
from gsrender.cli.common import load_model
from gsrender.turntable import plant_path
from gsrender.views import render_view


def main(argv=None) -> int:
    from gsrender.viewer.app import Viewer
    from gsrender.viewer.browser import Browser, drawn_canvas, free_port, hide_notifications, open_page

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "images" / "viewer.png"))
    p.add_argument("--width", type=int, default=1100)
    p.add_argument("--height", type=int, default=680)
    args = p.parse_args(argv)
    model = load_model(plant_path())
    viewer = Viewer(model, port=free_port(), up="-y")
    browser = Browser(args.width, args.height)
    try:
        w, h = open_page(browser, viewer)
        cam = scene_orbit(model.means, 8, w, h, 45.0, "-y", 20.0)[1]
        viewer.set_camera(cam)
        viewer.wait_frame(timeout=180, like=cam)
        with torch.no_grad():
            offline = viz.to_uint8(render_view(model, cam, torch.device("cpu"), features=False).colors[0])
        _, db = drawn_canvas(browser, offline, 30.0, timeout=90.0)
        hide_notifications(browser)
        time.sleep(0.5)
        viz.save_image(args.out, browser.screenshot())
    finally:
        browser.close()
        viewer.close()
    print(f"wrote {args.out} (canvas vs offline render: {db:.1f} dB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
