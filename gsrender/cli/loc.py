"""`gsrender loc build` (scene + posed images -> map file) and `gsrender loc query` (images with
intrinsics -> poses; errors too when the query list carries ground-truth poses)."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from gsrender.cli.common import CliError, load_model
from gsrender.io import atomic
from gsrender.io.camera_json import load_cameras_json

METHODS = ("splitgs", "no_split", "no_select", "no_consistency", "plain")


def add_parser(sub) -> None:
    """Registers the `loc` subcommand on gsrender's subparsers."""
    loc = sub.add_parser("loc", help="SplitGS-Loc: build a localization map, localize images")
    lsub = loc.add_subparsers(dest="loc_command", required=True, metavar="{build,query}")
    b = lsub.add_parser("build", help="scene (.ply/.splat) + posed images -> map .npz")
    b.add_argument("--scene", required=True, help="trained 3DGS (.ply INRIA layout or .splat)")
    _cameras_args(b, query=False)
    b.add_argument("--method", default="splitgs", choices=METHODS)
    b.add_argument("--out", required=True, help="map file to write (.npz)")
    b.set_defaults(func=cmd_build)
    q = lsub.add_parser("query", help="localize images (intrinsics only) against a map")
    q.add_argument("--map", required=True, help="map file from `gsrender loc build`")
    _cameras_args(q, query=True)
    q.add_argument("--json", default=None, help="write per-image poses, inliers (and errors) here")
    q.add_argument("--poses-out", default=None, metavar="DIR",
                   help="write the localized images as a COLMAP text model (images.txt, "
                        "cameras.txt) here")
    q.add_argument("--pnp", default="auto", choices=("auto", "poselib", "opencv"),
                   help="PnP + RANSAC backend (auto: PoseLib when installed, else OpenCV USAC)")
    q.add_argument("--top-k-views", type=int, default=None,
                   help="retrieval: match only against the points seen by the k map views whose "
                        "global descriptor is closest to the query's (default: the whole map)")
    q.set_defaults(func=cmd_query)


def _cameras_args(p: argparse.ArgumentParser, query: bool) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--colmap", metavar="SPARSE_DIR", help="COLMAP model folder")
    g.add_argument("--cameras-json", metavar="FILE", help="camera JSON (frames layout or a list)")
    if query:
        g.add_argument("--intrinsics", metavar="FILE",
                       help="JSON list of {file, width, height, K}: no pose needed")
    split = "TestSplit" if query else "TrainSplit"
    g.add_argument("--7scenes", dest="seven_scenes", metavar="SCENE_DIR",
                   help=f"a 7-Scenes scene folder (the sequences of {split}.txt)")
    g.add_argument("--cambridge", metavar="SCENE_DIR",
                   help=f"a Cambridge Landmarks scene folder (dataset_{'test' if query else 'train'}.txt)")
    p.add_argument("--focal", type=float, default=None,
                   help="focal length in px for --7scenes (default 525) / --cambridge")
    p.add_argument("--images", default=None, help="image folder (default: as the cameras say)")
    p.add_argument("--max-features", type=int, default=2000, help="SIFT keypoints per image")


def _load(args, query: bool) -> tuple[list, list]:
    """LocImage records and their photos (RGB uint8, resized to the camera size when they
    differ)."""
    import cv2
    import imageio.v3 as iio

    from gsrender.io import load_colmap_cameras
    from gsrender.loc import datasets as D

    split = "test" if query else "train"
    try:
        if args.colmap or args.cameras_json:
            cams = (load_colmap_cameras(args.colmap, args.images) if args.colmap
                    else load_cameras_json(args.cameras_json))
            base = Path(args.images) if args.images else None
            recs = [D.LocImage(c.name, base / c.name if base else c.image_path,
                               c.K.double().numpy(), c.width, c.height,
                               c.viewmat.double().numpy()) for c in cams]
        elif getattr(args, "intrinsics", None):
            recs = D.load_intrinsics_json(args.intrinsics, args.images)
        elif args.seven_scenes:
            recs = D.load_7scenes(args.seven_scenes, split, args.focal or D.SEVEN_SCENES_FOCAL)
        else:
            recs = D.load_cambridge(args.cambridge, split, args.focal)
    except ValueError as e:
        raise CliError(str(e)) from None
    imgs = []
    for r in recs:
        if r.image_path is None or not Path(r.image_path).is_file():
            raise CliError(f"image {r.name!r}: {r.image_path} not found (use --images)")
        im = np.asarray(iio.imread(r.image_path))[..., :3]
        if im.shape[:2] != (r.height, r.width):
            im = cv2.resize(im, (r.width, r.height), interpolation=cv2.INTER_AREA)
        imgs.append(im)
    return recs, imgs


def cmd_build(args) -> int:
    import torch

    from gsrender.loc import pipeline as P
    from gsrender.loc.features import SiftExtractor
    from gsrender.loc.mapfile import save_map

    model = load_model(args.scene).to(dtype=torch.float32)
    recs, imgs = _load(args, query=False)
    if any(r.viewmat is None for r in recs):
        raise CliError("building a map needs posed training images")
    vms = torch.from_numpy(np.stack([r.viewmat for r in recs])).float()
    Ks = torch.from_numpy(np.stack([r.K for r in recs])).float()
    m, info = P.build_map(model, vms, Ks, imgs, [r.width for r in recs],
                          [r.height for r in recs], SiftExtractor(args.max_features),
                          P.preset(args.method))
    save_map(args.out, m, {"method": args.method, "scene": str(args.scene),
                           "n_gaussians": info["n_gaussians"], "n_views": len(recs)})
    print(f"{args.method}: {info['map_points']} map points from {info['n_gaussians']} Gaussians "
          f"and {len(recs)} views in {info['timings_s']['total']:.1f}s -> {args.out}")
    return 0


def cmd_query(args) -> int:
    from gsrender.io import Camera, write_colmap_text
    from gsrender.loc import metrics as LM
    from gsrender.loc.features import SiftExtractor
    from gsrender.loc.mapfile import load_map
    from gsrender.loc.query import localize

    m, _ = load_map(args.map)
    recs, imgs = _load(args, query=True)
    sift = SiftExtractor(args.max_features)
    rows, t_err, r_err, posed = [], [], [], []
    for rec, im in zip(recs, imgs):
        r = localize(im, rec.K, m.points, m.descriptors, sift, backend=args.pnp,
                     top_k_views=args.top_k_views, point_views=m.point_views,
                     view_descriptors=m.view_descriptors, codebook=m.codebook)
        row = {"name": rec.name, "success": r.success, "R": r.R.tolist(), "t": r.t.tolist(),
               "inliers": int(r.inliers.sum()), "matches": len(r.matches),
               "timings_ms": r.timings_ms}
        msg = f"{rec.name}: {'ok' if r.success else 'FAILED'}  inliers {row['inliers']}/" \
              f"{row['matches']}"
        if rec.viewmat is not None:
            te, re = (LM.pose_errors(rec.viewmat[:3, :3], rec.viewmat[:3, 3], r.R, r.t)
                      if r.success else (math.inf,) * 2)
            t_err.append(te), r_err.append(re)
            row.update(t_err=te, r_err_deg=re)
            msg += f"  t err {te:.4f}  r err {re:.3f}°"
        if r.success:
            posed.append(Camera(rec.name, rec.width, rec.height, rec.K, r.viewmat))
        rows.append(row)
        print(f"{msg}  {r.timings_ms['total']:.0f} ms")
    out = {"queries": rows}
    if t_err:
        out["summary"] = LM.summarize(t_err, r_err)
        print("summary (errors against the given poses): " + json.dumps(out["summary"]))
    if args.poses_out:
        write_colmap_text(args.poses_out, posed)
        print(f"{len(posed)}/{len(recs)} localized -> {Path(args.poses_out) / 'images.txt'}")
    if args.json:
        atomic.write_text(Path(args.json), json.dumps(out, indent=1))
    return 0
