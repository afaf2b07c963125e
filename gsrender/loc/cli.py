"""`gsrender loc build` (scene + posed images -> map file) and `gsrender loc query` (images ->
poses, with errors when the cameras file carries ground-truth poses)."""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np


def add_loc_parser(sub) -> None:
    """Registers the `loc` subcommand on gsrender's subparsers."""
    loc = sub.add_parser("loc", help="SplitGS-Loc: build a localization map, localize images")
    lsub = loc.add_subparsers(dest="loc_command", required=True, metavar="{build,query}")
    b = lsub.add_parser("build", help="scene (.ply/.splat) + posed images -> map .npz")
    b.add_argument("--scene", required=True, help="trained 3DGS (.ply INRIA layout or .splat)")
    _cameras_args(b)
    b.add_argument("--method", default="splitgs", choices=("splitgs", "B0", "B1", "B2"))
    b.add_argument("--out", required=True, help="map file to write (.npz)")
    b.set_defaults(func=cmd_build)
    q = lsub.add_parser("query", help="localize images against a map")
    q.add_argument("--map", required=True, help="map file from `gsrender loc build`")
    _cameras_args(q)
    q.add_argument("--json", default=None, help="write per-image poses (and errors) here")
    q.add_argument("--pnp", default="auto", choices=("auto", "poselib", "opencv"),
                   help="PnP + RANSAC backend (auto: PoseLib when installed, else OpenCV USAC)")
    q.set_defaults(func=cmd_query)


def _cameras_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--colmap", metavar="SPARSE_DIR", help="COLMAP model folder")
    g.add_argument("--cameras-json", metavar="FILE", help="camera JSON (frames layout or a list)")
    p.add_argument("--images", default=None, help="image folder (default: as the cameras say)")
    p.add_argument("--max-features", type=int, default=2000, help="SIFT keypoints per image")


def _load(args) -> tuple[list, list]:
    """Cameras and their photos (RGB uint8, resized to the camera size when they differ)."""
    import cv2
    import imageio.v3 as iio

    from gsrender.cli import CliError, load_cameras
    from gsrender.io import load_colmap_cameras

    if args.colmap:
        cams = load_colmap_cameras(args.colmap, args.images)
    else:
        cams = load_cameras(args.cameras_json)
        if args.images:
            cams = [replace(c, image_path=Path(args.images) / c.name) for c in cams]
    imgs = []
    for c in cams:
        if c.image_path is None or not Path(c.image_path).is_file():
            raise CliError(f"camera {c.name!r}: image {c.image_path} not found (use --images)")
        im = np.asarray(iio.imread(c.image_path))[..., :3]
        if im.shape[:2] != (c.height, c.width):
            im = cv2.resize(im, (c.width, c.height), interpolation=cv2.INTER_AREA)
        imgs.append(im)
    return cams, imgs


def cmd_build(args) -> int:
    import torch

    from gsrender.cli import load_model
    from gsrender.io import stack_cameras
    from gsrender.loc import pipeline as P
    from gsrender.loc.features import SiftExtractor
    from gsrender.loc.mapfile import save_map

    model = load_model(args.scene).to(dtype=torch.float32)
    cams, imgs = _load(args)
    vms, Ks, W, H = stack_cameras(cams)
    m, info = P.build_map(model, vms, Ks, imgs, W, H, SiftExtractor(args.max_features),
                          P.preset(args.method))
    save_map(args.out, m, {"method": args.method, "scene": str(args.scene),
                           "n_gaussians": info["n_gaussians"], "n_views": len(cams)})
    print(f"{args.method}: {info['map_points']} map points from {info['n_gaussians']} Gaussians "
          f"and {len(cams)} views in {info['timings_s']['total']:.1f}s -> {args.out}")
    return 0


def cmd_query(args) -> int:
    from gsrender.loc import metrics as LM
    from gsrender.loc.features import SiftExtractor
    from gsrender.loc.mapfile import load_map
    from gsrender.loc.query import localize

    m, _ = load_map(args.map)
    cams, imgs = _load(args)
    sift = SiftExtractor(args.max_features)
    rows, t_err, r_err = [], [], []
    for c, im in zip(cams, imgs):
        r = localize(im, c.K.numpy(), m.points, m.descriptors, sift, backend=args.pnp)
        vm = c.viewmat.double().numpy()
        te, re = LM.pose_errors(vm[:3, :3], vm[:3, 3], r.R, r.t) if r.success else (math.inf,) * 2
        t_err.append(te), r_err.append(re)
        rows.append({"name": c.name, "success": r.success, "R": r.R.tolist(), "t": r.t.tolist(),
                     "inliers": int(r.inliers.sum()), "matches": len(r.matches),
                     "t_err": te, "r_err_deg": re, "timings_ms": r.timings_ms})
        print(f"{c.name}: {'ok' if r.success else 'FAILED'}  inliers {int(r.inliers.sum())}/"
              f"{len(r.matches)}  t err {te:.4f}  r err {re:.3f}°  {r.timings_ms['total']:.0f} ms")
    summary = LM.summarize(t_err, r_err)
    print("summary (errors against the cameras file's poses): " + json.dumps(summary))
    if args.json:
        Path(args.json).write_text(json.dumps({"queries": rows, "summary": summary}, indent=1))
    return 0
