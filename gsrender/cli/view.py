"""`gsrender view SCENE.(ply|splat) [--colmap DIR] [--host H] [--port P]`."""
from __future__ import annotations

from pathlib import Path

from gsrender.cameras import UP_AXES
from gsrender.cli.common import CliError, default_up, load_model, pick_device
from gsrender.contract import MODES as RASTER_MODES
from gsrender.io import load_colmap_cameras

VIEW_EXTRA = "pip install 'gsrender[view]' (or: pip install viser)"


def add_parser(sub) -> None:
    v = sub.add_parser("view", help="interactive browser viewer of a .ply/.splat scene (viser)")
    v.add_argument("scene", metavar="SCENE", help="scene file (.ply INRIA layout or .splat)")
    v.add_argument("--colmap", metavar="SPARSE_DIR", help="show these COLMAP cameras as frustums")
    v.add_argument("--host", default="127.0.0.1",
                   help="address to serve on (default loopback; 0.0.0.0 opens it to the network)")
    v.add_argument("--port", type=int, default=8080, help="port (default 8080; the next free one if taken)")
    v.add_argument("--up", choices=("auto", *UP_AXES), default="auto",
                   help="scene up axis (auto: -y for .splat, +z for .ply)")
    v.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
    v.add_argument("--mode", choices=RASTER_MODES, default="sorted", help="sorted (3DGS) or weighted")
    v.add_argument("--max-side", type=int, default=1024, help="longer image side when still (default 1024)")
    v.add_argument("--moving-side", type=int, default=256, help="longer image side while moving (default 256)")
    v.set_defaults(func=cmd_view)


def require_viser() -> None:
    """A CliError saying how to install viser when it cannot be imported (the Viewer imports it
    only when it starts)."""
    try:
        import viser  # noqa: F401
    except ImportError as e:
        raise CliError(f"the viewer needs viser ({e}); {VIEW_EXTRA}") from None


def open_viewer(model, *, scene_path=None, up: str = "auto", **kw):
    """A Viewer, or a CliError saying how to install viser when it is missing."""
    require_viser()
    from gsrender.viewer.app import Viewer

    if up == "auto":
        up = default_up(Path(scene_path)) if scene_path is not None else "+z"
    return Viewer(model, up=up, **kw)


def cmd_view(args) -> int:
    if not 1 <= args.port <= 65535:
        raise CliError(f"--port: must be in 1..65535, got {args.port}")
    require_viser()  # before the scene loads
    device = pick_device(args.backend)
    model = load_model(args.scene)
    cameras = None
    if args.colmap:
        cameras = load_colmap_cameras(args.colmap)
    viewer = open_viewer(model, scene_path=args.scene, up=args.up, device=device, host=args.host,
                         port=args.port, cameras=cameras, raster_mode=args.mode,
                         max_side=args.max_side, moving_side=args.moving_side)
    print(f"gsrender view: {model.num_gaussians:,} Gaussians on {device.type}"
          + (f", {len(cameras)} cameras" if cameras else ""))
    print(f"open {viewer.url} in a browser (Ctrl+C to stop)", flush=True)
    viewer.wait()
    return 0
