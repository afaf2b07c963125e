"""`gsrender render`: a .ply/.splat scene from COLMAP, camera-JSON or orbit cameras, to PNGs."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch
from tqdm import tqdm

from gsrender import viz
from gsrender.cameras import UP_AXES, scene_orbit
from gsrender.cli.common import CliError, add_render_options, default_up, load_model, pick_device, sync
from gsrender.io import load_colmap_cameras
from gsrender.io.camera_json import load_cameras_json
from gsrender.views import render_view, save_views


def add_parser(sub) -> None:
    r = sub.add_parser("render", help="render a .ply/.splat scene from COLMAP, JSON or orbit cameras")
    r.add_argument("--scene", required=True, help="scene file (.ply INRIA layout or .splat)")
    cams = r.add_mutually_exclusive_group()
    cams.add_argument("--colmap", metavar="SPARSE_DIR", help="COLMAP model folder (cameras/images .bin|.txt)")
    cams.add_argument("--cameras-json", metavar="FILE", help="camera JSON (frames layout or a list)")
    cams.add_argument("--orbit", type=int, metavar="N", help="N orbit cameras around the scene (default 8)")
    r.add_argument("--width", type=int, default=None, help="image width (orbit default 640; resizes others)")
    r.add_argument("--height", type=int, default=None, help="image height (orbit default 480)")
    r.add_argument("--fov", type=float, default=60.0, help="orbit horizontal field of view, degrees")
    r.add_argument("--up", choices=("auto", *UP_AXES), default="auto",
                   help="orbit up axis (auto: -y for .splat, +z for .ply)")
    r.add_argument("--elevation", type=float, default=20.0, help="orbit elevation above the horizon, deg")
    r.add_argument("--distance-scale", type=float, default=1.0, help="orbit distance multiplier")
    r.add_argument("--sh-degree", type=int, default=None, help="use at most this SH degree")
    r.add_argument("--background", type=float, nargs=3, default=None, metavar=("R", "G", "B"))
    r.add_argument("--what", default="rgb", help="comma list of rgb,depth,alpha,features (default rgb)")
    r.add_argument("--out", default="out/render", help="output folder (default out/render)")
    add_render_options(r)
    r.set_defaults(func=cmd_render)


def _render_cameras(args, scene: Path, model) -> list:
    if args.colmap:
        cams = load_colmap_cameras(args.colmap)
    elif args.cameras_json:
        cams = load_cameras_json(args.cameras_json)
    else:
        if not 0.0 < args.fov < 180.0:
            raise CliError(f"--fov: must be in (0, 180) degrees, got {args.fov}")
        up = args.up if args.up != "auto" else default_up(scene)
        return scene_orbit(model.means, args.orbit or 8, args.width or 640, args.height or 480,
                           args.fov, up, args.elevation, args.distance_scale)
    if args.width or args.height:  # resize, keeping the aspect ratio when only one is given
        out = []
        for c in cams:
            w = args.width or max(1, round(c.width * args.height / c.height))
            h = args.height or max(1, round(c.height * args.width / c.width))
            out.append(c.resized(w, h))
        cams = out
    return cams


def cmd_render(args) -> int:
    scene = Path(args.scene)
    device = pick_device(args.backend)
    model = load_model(scene).to(device=device, dtype=torch.float32)
    cams = _render_cameras(args, scene, model)
    if args.max_views is not None:
        cams = cams[: args.max_views]
    what = {w.strip() for w in args.what.split(",") if w.strip()}
    bad = what - {"rgb", "depth", "alpha", "features"}
    if bad or not what:
        raise CliError(f"--what: expected a comma list of rgb,depth,alpha,features, got {args.what!r}")
    out_dir = Path(args.out)
    times, pca = [], None
    with torch.no_grad():
        for i, cam in enumerate(tqdm(cams, desc="render", unit="view", disable=args.no_progress)):
            sync(device)
            t0 = time.perf_counter()
            out = render_view(model, cam, device, mode=args.mode, precision=args.precision,
                              background=args.background, features="features" in what,
                              sh_degree=args.sh_degree)
            sync(device)
            times.append((time.perf_counter() - t0) * 1e3)
            if pca is None and out.features is not None:  # one PCA colouring for every view
                pca = viz.pca_basis(out.features[0], out.alphas[0])
            save_views(out, out_dir, i, len(cams), what, pca)
    print(f"rendered {len(cams)} views of {model.num_gaussians} Gaussians to {out_dir} "
          f"(median {statistics.median(times):.1f} ms/view on {device.type})")
    return 0
