"""Refreshes the pictures docs/gallery.md shows, in docs/images/ (`make bench` runs it after the
benchmarks): copies the benchmark PNGs from their out/ folders, renders the plant turntable, and
takes the viewer screenshot when headless Chromium is installed. Says which ones it lacks.

    python scripts/gallery_images.py [--out docs/images] [--skip-plant] [--skip-viewer]
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# docs/images name <- the file a benchmark writes (with the --out folder `make bench` gives it)
COPIES = {
    "time_vs_D.png": "out/fps/time_vs_D.png",
    "time_vs_N.png": "out/fps/time_vs_N.png",
    "stages.png": "out/fps/stages.png",
    "channels.png": "out/channels/channels.png",
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "images"))
    p.add_argument("--skip-plant", action="store_true")
    p.add_argument("--skip-viewer", action="store_true")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    missing = []
    for name, src in COPIES.items():
        if (ROOT / src).is_file():
            shutil.copyfile(ROOT / src, out / name)
        else:
            missing.append(f"{name} (run the benchmark that writes {src})")
    if not args.skip_plant:
        import torch

        from gsrender.cli.common import load_model
        from gsrender.turntable import plant_path, render_turntable

        tmp = ROOT / "out" / "gallery" / "plant"
        render_turntable(load_model(plant_path()), torch.device("cpu"), tmp, frames=36, size=320)
        shutil.copyfile(tmp / "turntable.gif", out / "plant_turntable.gif")
        shutil.copyfile(tmp / "overview.png", out / "plant_overview.png")
    if not args.skip_viewer:
        from gsrender.viewer.browser import find_chromium

        if find_chromium() is None:
            missing.append("viewer.png (needs chromium + chromium-driver + selenium: `make browser`)")
        else:
            sys.path.insert(0, str(ROOT / "scripts"))
            from viewer_screenshot import main as screenshot

            screenshot(["--out", str(out / "viewer.png")])
    print(f"docs images in {out}" + ("; missing: " + ", ".join(missing) if missing else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
