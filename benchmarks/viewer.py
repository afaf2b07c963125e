"""The viewer's interactive frame time: what one frame of `gsrender view` costs here, i.e. the
render thread's work per frame (gsrender.rasterize + the mode's picture + viser's JPEG/depth
encoding and queueing), median over an orbit of views, at the full (still) and the moving
resolution. The browser's own drawing (a textured quad) is not included.

    python benchmarks/viewer.py [--scene data/plant/plant.splat] [--width 640 --height 480]
                                [--frames 24] [--moving-side 256] [--mode rgb] [--out out/viewer]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import env_block, median, p90
from gsrender.cameras import scene_orbit
from gsrender.cli.common import default_up, load_model, pick_device
from gsrender.io import atomic
from gsrender.viewer.camera import fit_size
from gsrender.viewer.frames import FrameRenderer


def time_frames(frames: FrameRenderer, cams, mode: str, scene_api) -> dict:
    render, send, cpu = [], [], []
    frames.render(cams[0], mode)  # warm-up: thread pools, allocator
    for cam in cams:
        c0 = time.process_time()
        f = frames.render(cam, mode)
        t0 = time.perf_counter()
        scene_api.set_background_image(f.image, format="jpeg", jpeg_quality=90, depth=f.depth)
        send.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
        render.append(f.ms)
    total = [a + b for a, b in zip(render, send)]
    return {"width": cams[0].width, "height": cams[0].height, "frames": len(cams),
            "render_ms_median": median(render), "send_ms_median": median(send),
            # CPU time of the process (all threads) per frame: less sensitive to other load
            "cpu_ms_median": median(cpu),
            "frame_ms_median": median(total), "frame_ms_p90": p90(total),
            "fps_median": 1e3 / median(total)}


def main(argv=None) -> int:
    import viser

    from gsrender.viewer.browser import free_port

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scene", default=str(ROOT / "data" / "plant" / "plant.splat"))
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=480)
    p.add_argument("--frames", type=int, default=24)
    p.add_argument("--moving-side", type=int, default=256, help="the viewer's default moving resolution")
    p.add_argument("--mode", default="rgb", help="render mode (rgb, depth, alpha, features, labels)")
    p.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--out", default="out/viewer")
    args = p.parse_args(argv)
    device = pick_device(args.backend)
    scene = Path(args.scene)
    model = load_model(scene)
    frames = FrameRenderer(model, device)
    cams = scene_orbit(model.means, args.frames, args.width, args.height, 60.0, default_up(scene))
    mw, mh = fit_size(args.width, args.height, args.moving_side)
    server = viser.ViserServer(host="127.0.0.1", port=free_port(), verbose=False)
    try:
        res = {"scene": str(scene), "n_gaussians": model.num_gaussians, "mode": args.mode,
               "env": env_block(device),
               "full": time_frames(frames, cams, args.mode, server.scene),
               "moving": time_frames(frames, [c.resized(mw, mh) for c in cams], args.mode, server.scene)}
    finally:
        server.stop()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "viewer.json", json.dumps(res, indent=1))
    for k in ("full", "moving"):
        r = res[k]
        print(f"{k:>6} {r['width']}x{r['height']}: {r['frame_ms_median']:.0f} ms/frame median "
              f"(render {r['render_ms_median']:.0f} + encode/send {r['send_ms_median']:.1f}; p90 "
              f"{r['frame_ms_p90']:.0f}) = {r['fps_median']:.1f} FPS over {r['frames']} frames; "
              f"CPU time {r['cpu_ms_median']:.0f} ms/frame")
    print(f"{model.num_gaussians} Gaussians on {device.type}, {torch.get_num_threads()} threads, "
          f"load average {res['env']['loadavg']}; wrote {out / 'viewer.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
