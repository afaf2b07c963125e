"""`gsrender voda`: train per-Gaussian features on a scene with masks (a Removal-3D scene, or a
user scene: a trained .ply / .splat, cameras from a COLMAP model or a gsrender camera JSON, and
one mask PNG per image), with or without VODA, select an object (by id, or by a pixel of a named
view), and write the removed / extracted / labelled .ply, their renders and (with ground truth)
the Removal-3D metrics.

Masks: one PNG per image, named <image stem>.png (0 background; --ignore marks unlabelled
pixels), either associated across views (the same integer id for the same object in every view)
or, with --associate, per-view instance masks numbered independently in each view (SAM style),
which voda.associate matches across views through the Gaussians first. A mask at another
resolution than its camera rescales that camera. With --missing-masks skip, images without a
mask are rendered but not trained on."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from gsrender.io import atomic
from gsrender.voda.baselines import TRAINED, VotingBaseline, make_baseline
from gsrender.voda.loss import VodaConfig
from gsrender.voda.removal3d import SPLITS


def add_parser(sub) -> None:
    v = sub.add_parser("voda", help="VODA: train features on masks, select, remove, score")
    src = v.add_mutually_exclusive_group()
    src.add_argument("--synthetic", choices=SPLITS, default=None,
                     help="a Removal-3D scene of this split (default: isolated)")
    src.add_argument("--scene", default=None, help="user scene (.ply INRIA layout, or .splat)")
    cams = v.add_mutually_exclusive_group()
    cams.add_argument("--colmap", default=None,
                      help="cameras of --scene: a COLMAP model folder (or one holding sparse/0)")
    cams.add_argument("--cameras-json", default=None,
                      help="cameras of --scene (gsrender JSON list)")
    v.add_argument("--masks", "--labels", dest="labels", default=None,
                   help="folder of mask PNGs named <image stem>.png (ids, background 0), associated "
                        "across views unless --associate")
    v.add_argument("--associate", action="store_true",
                   help="--masks are per-view instance masks with independent ids: associate "
                        "them across views through the Gaussians (voda.associate) first")
    v.add_argument("--missing-masks", choices=("error", "skip"), default="error",
                   help="an image without a mask: an error (default), or skip: not trained on, "
                        "still rendered (e.g. views held out to check the removal)")
    v.add_argument("--ignore", type=int, default=255,
                   help="mask value of unlabelled pixels (default 255; -1 for none)")
    v.add_argument("--click", nargs=3, metavar=("VIEW", "X", "Y"), default=None,
                   help="select the object under pixel (X, Y) of the mask of image VIEW "
                        "(instead of --object)")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--width", type=int, default=160, help="synthetic view width (default 160)")
    v.add_argument("--height", type=int, default=120, help="synthetic view height (default 120)")
    v.add_argument("--baseline", choices=(*TRAINED, "vote"), default="identity",
                   help="identity, grouping (identity + 3D kNN regulariser), distill (per-view "
                        "2D features), vote (training-free projection voting; no VODA)")
    v.add_argument("--no-voda", dest="voda", action="store_false", help="baseline loss only")
    v.add_argument("--iters", type=int, default=150)
    v.add_argument("--object", type=int, default=1, help="object id to select (default 1)")
    v.add_argument("--tau-rel", type=float, default=VodaConfig.tau_rel)
    v.add_argument("--lambda-vol", type=float, default=VodaConfig.lambda_vol)
    v.add_argument("--lambda-pix", type=float, default=VodaConfig.lambda_pix)
    v.add_argument("--membership", choices=("walk", "rendered"), default=VodaConfig.membership,
                   help="VODA's cluster members: the renderer's contributors (rendered) or the "
                        "walk past its stop (walk); default %(default)s")
    v.add_argument("--clustering", choices=("gap", "ray"), default=VodaConfig.clustering,
                   help="VODA's clusters: depth and extent along the pixel ray (ray) or chained "
                        "mean-depth gaps (gap); default %(default)s")
    v.add_argument("--out", default="out/voda", help="output folder (default out/voda)")
    v.set_defaults(func=cmd_voda)


def _colmap_dir(path: Path) -> Path:
    for cand in (path, path / "sparse" / "0", path / "sparse"):
        if any((cand / f"cameras.{ext}").exists() for ext in ("bin", "txt")):
            return cand
    raise ValueError(f"--colmap: no COLMAP model (cameras.bin/.txt) in {path}, {path}/sparse/0 or "
                     f"{path}/sparse")


def read_masks(folder, names, sizes, ignore: int, skip_missing: bool = False):
    """[C,H,W] long masks (-1 where the PNG holds `ignore`) of the images `names` and the
    per-view scale (sx, sy) of each mask against its camera size (W, H) in `sizes`. With
    skip_missing an image without a mask gets an all -1 (unlabelled) one at the others' size."""
    import imageio.v3 as iio

    from gsrender.io import safe_join

    out, scale = [], []
    for nm, (W, H) in zip(names, sizes):
        path = safe_join(folder, f"{Path(nm).stem}.png", "masks")
        if not path.exists():
            if skip_missing:
                out.append(None)
                scale.append(None)
                continue
            raise ValueError(f"--masks: no mask {path.name} for image {nm!r} in {folder} "
                             "(--missing-masks skip to leave it out of the training)")
        img = np.asarray(iio.imread(path))
        if img.ndim == 3:
            img = img[..., 0]
        h, w = img.shape
        if abs(w / W - h / H) > 0.02 * w / W:
            raise ValueError(f"--masks: {path.name} is {w}x{h}, its camera {W}x{H}: another "
                             "aspect ratio")
        lab = torch.from_numpy(img.astype(np.int64))
        if ignore >= 0:
            lab[lab == ignore] = -1
        out.append(lab)
        scale.append((w / W, h / H))
    found = [c for c, m in enumerate(out) if m is not None]
    if not found:
        raise ValueError(f"--masks: no mask in {folder} for any of the {len(names)} images")
    if len({out[c].shape for c in found}) != 1:
        raise ValueError("--masks: all masks must have the same size")
    ref = found[0]  # a skipped image: the size and scale of the first mask (cameras share a size)
    for c, m in enumerate(out):
        if m is None:
            out[c] = torch.full_like(out[ref], -1)
            scale[c] = (out[ref].shape[1] / sizes[c][0], out[ref].shape[0] / sizes[c][1])
    return torch.stack(out), scale


def _user_scene(args):
    from gsrender.io import load_colmap_cameras, load_ply, load_splat
    from gsrender.io.camera_json import load_cameras_json

    if not ((args.cameras_json or args.colmap) and args.labels):
        raise ValueError("--scene needs --colmap or --cameras-json, and --masks")
    path = Path(args.scene)
    model = load_splat(path) if path.suffix.lower() == ".splat" else load_ply(path)
    if args.colmap:
        cams = load_colmap_cameras(_colmap_dir(Path(args.colmap)))
    else:  # either camera-JSON layout, as every command reads it
        cams = load_cameras_json(args.cameras_json)
    names = [c.name for c in cams]
    vm = torch.stack([c.viewmat for c in cams])
    K = torch.stack([c.K for c in cams])
    sizes = [(c.width, c.height) for c in cams]
    labels, scale = read_masks(args.labels, names, sizes, args.ignore,
                               skip_missing=args.missing_masks == "skip")
    K = K.clone()
    for c, (sx, sy) in enumerate(scale):  # cameras at the masks' resolution
        K[c, 0] *= sx
        K[c, 1] *= sy
    H, W = labels.shape[1:]
    return model, vm, K, W, H, labels, names


def _clicked_object(click, names, labels) -> int:
    view, x, y = click
    stems = [Path(n).stem for n in names]
    if view not in names and view not in stems:
        raise ValueError(f"--click: no image {view!r} (images: {', '.join(names[:5])}...)")
    c = names.index(view) if view in names else stems.index(view)
    x, y = int(x), int(y)
    H, W = labels.shape[1:]
    if not (0 <= x < W and 0 <= y < H):
        raise ValueError(f"--click: pixel ({x}, {y}) outside the {W}x{H} mask")
    k = int(labels[c, y, x])
    if k <= 0:
        raise ValueError(f"--click: pixel ({x}, {y}) of {view} is background or unlabelled ({k})")
    return k


def labelled(model, baseline):
    """The model with per-Gaussian labels: object_ids = the best class (-1 where its score is
    not above the baseline's selection threshold), features = the class scores."""
    from dataclasses import replace

    with torch.no_grad():
        scores = baseline.class_scores().float()
    best, cls = scores.max(1)
    ids = torch.where(best > baseline.select_threshold, cls, torch.full_like(cls, -1))
    return replace(model, object_ids=ids, features=scores)


def cmd_voda(args) -> int:
    from gsrender.io import save_ply
    from gsrender.render import rasterize
    from gsrender.viz import save_image
    from gsrender.voda import removal3d as R
    from gsrender.voda.evaluate import eval_views, evaluate
    from gsrender.voda.select import extract, remove, select_object
    from gsrender.voda.train import frozen_views, train_features

    if args.iters < 1:
        raise ValueError(f"--iters must be >= 1, got {args.iters}")
    out = Path(args.out)
    cfg = VodaConfig(tau_rel=args.tau_rel, lambda_vol=args.lambda_vol, lambda_pix=args.lambda_pix,
                     membership=args.membership, clustering=args.clustering)
    sc, association = None, None
    if args.scene:
        model, vm, K, W, H, labels, names = _user_scene(args)
        if args.associate:
            from gsrender.voda.associate import associate_masks

            labels, maps = associate_masks(model, vm, K, W, H, labels)
            association = {names[c]: {str(i): k for i, k in m.items()} for c, m in maps.items()}
        n_classes = int(labels.max()) + 1
        if args.click:
            args.object = _clicked_object(args.click, names, labels)
    else:
        if args.click or args.colmap or args.associate:
            raise ValueError("--click, --colmap and --associate need --scene")
        sc = R.make_removal3d(args.synthetic or "isolated", args.seed, width=args.width,
                              height=args.height)
        model, vm, K, W, H = sc.model, sc.viewmats, sc.Ks, sc.width, sc.height
        labels = R.sam_noise(sc.masks, args.seed)
        n_classes = sc.n_objects + 1
    if not 1 <= args.object < n_classes:
        raise ValueError(f"--object must be in [1, {n_classes - 1}], got {args.object}")
    # views without a labelled pixel (--missing-masks skip) are rendered but not trained on
    train = torch.nonzero((labels >= 0).flatten(1).any(1)).flatten()
    if len(train) == 0:
        raise ValueError("--masks: no labelled pixel in any view (all ignored)")
    if args.baseline == "vote":
        b, res, use_voda = VotingBaseline(model.means, labels, vm, K, n_classes), None, False
    else:
        views = frozen_views(model, vm[train], K[train], W, H, labels[train], cfg)
        b = make_baseline(args.baseline, model.means, n_classes, len(views), seed=args.seed)
        use_voda = args.voda
        res = train_features(b, views, args.iters, cfg if use_voda else None, seed=args.seed)
    sel = select_object(b, args.object)
    report = {"baseline": args.baseline, "voda": use_voda, "iters": args.iters if res else 0,
              "iter_ms": res["iter_ms"] if res else 0.0, "object": args.object,
              "selected": int(sel.sum()), "n_gaussians": model.num_gaussians}
    if association is not None:  # image -> {mask id in that image: global object id}
        report["association"] = association
    if sc is None and len(train) < len(names):
        kept = set(train.tolist())
        report["not_trained_on"] = [nm for c, nm in enumerate(names) if c not in kept]
    out.mkdir(parents=True, exist_ok=True)
    save_ply(out / "labelled.ply", labelled(model, b))
    for name, part in (("removed", remove(model, sel)), ("extracted", extract(model, sel))):
        if part.num_gaussians == 0:
            continue
        save_ply(out / f"{name}.ply", part)
        r = rasterize(part.means, part.quats, part.scales, part.opacities, part.sh, vm, K, W, H,
                      sh_degree=part.sh_degree)
        for c in range(vm.shape[0]):
            save_image(out / name / f"view_{c:03d}.png", r.colors[c].clamp(0, 1).detach())
    if sc is not None and model.object_ids is not None:
        ev = eval_views(model, sc.n_objects, vm, K, W, H, sc.masks)
        report["metrics"] = evaluate(model, b, ev, objects=[args.object])
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "metrics.json", json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


def main(argv=None) -> int:  # for `python -m gsrender.cli.voda`
    p = argparse.ArgumentParser(prog="gsrender")
    add_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
