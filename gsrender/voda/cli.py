"""`gsrender voda`: train per-Gaussian features on a scene with masks (a Removal-3D scene, or a
user scene: PLY + camera JSON + one label PNG per image), with or without VODA, select an object,
and write the removal / extraction renders and (with ground truth) the Removal-3D metrics."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from gsrender.voda.baselines import BASELINES
from gsrender.voda.loss import VodaConfig
from gsrender.voda.removal3d import SPLITS


def add_parser(sub) -> None:
    v = sub.add_parser("voda", help="VODA: train features on masks, select, remove, score")
    src = v.add_mutually_exclusive_group()
    src.add_argument("--synthetic", choices=SPLITS, default=None,
                     help="a Removal-3D scene of this split (default: isolated)")
    src.add_argument("--scene", default=None, help="user scene (.ply, INRIA layout)")
    v.add_argument("--cameras-json", default=None, help="cameras of --scene (gsrender JSON list)")
    v.add_argument("--labels", default=None,
                   help="folder of label PNGs named <camera name>.png (ids; 0 background)")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--width", type=int, default=160, help="synthetic view width (default 160)")
    v.add_argument("--height", type=int, default=120, help="synthetic view height (default 120)")
    v.add_argument("--baseline", choices=tuple(BASELINES), default="identity")
    v.add_argument("--no-voda", dest="voda", action="store_false", help="baseline loss only")
    v.add_argument("--iters", type=int, default=150)
    v.add_argument("--object", type=int, default=1, help="object id to select (default 1)")
    v.add_argument("--tau-rel", type=float, default=VodaConfig.tau_rel)
    v.add_argument("--lambda-vol", type=float, default=VodaConfig.lambda_vol)
    v.add_argument("--lambda-pix", type=float, default=VodaConfig.lambda_pix)
    v.add_argument("--out", default="out/voda", help="output folder (default out/voda)")
    v.set_defaults(func=cmd_voda)


def _user_scene(args):
    from gsrender.io import load_ply, safe_join
    from gsrender.synthetic import cameras_from_json

    if not (args.cameras_json and args.labels):
        raise ValueError("--scene needs --cameras-json and --labels")
    import imageio.v3 as iio

    model = load_ply(args.scene)
    vm, K, W, H, names = cameras_from_json(args.cameras_json)
    labels = []
    for nm in names:
        img = np.asarray(iio.imread(safe_join(args.labels, f"{nm}.png", "labels")))
        if img.ndim == 3:
            img = img[..., 0]
        if img.shape != (H, W):
            raise ValueError(f"labels: {nm}.png is {img.shape[1]}x{img.shape[0]}, cameras say {W}x{H}")
        labels.append(torch.from_numpy(img.astype(np.int64)))
    return model, vm, K, W, H, torch.stack(labels)


def cmd_voda(args) -> int:
    from gsrender.render import rasterize
    from gsrender.viz import save_image
    from gsrender.voda import removal3d as R
    from gsrender.voda.evaluate import eval_views, evaluate
    from gsrender.voda.select import extract, remove, select_object
    from gsrender.voda.train import frozen_views, train_features

    if args.iters < 1:
        raise ValueError(f"--iters must be >= 1, got {args.iters}")
    out = Path(args.out)
    cfg = VodaConfig(tau_rel=args.tau_rel, lambda_vol=args.lambda_vol, lambda_pix=args.lambda_pix)
    sc = None
    if args.scene:
        model, vm, K, W, H, labels = _user_scene(args)
        n_classes = int(labels.max()) + 1
    else:
        sc = R.make_removal3d(args.synthetic or "isolated", args.seed, width=args.width,
                              height=args.height)
        model, vm, K, W, H = sc.model, sc.viewmats, sc.Ks, sc.width, sc.height
        labels = R.sam_noise(sc.masks, args.seed)
        n_classes = sc.n_objects + 1
    if not 1 <= args.object < n_classes:
        raise ValueError(f"--object must be in [1, {n_classes - 1}], got {args.object}")
    views = frozen_views(model, vm, K, W, H, labels, cfg)
    b = BASELINES[args.baseline](model.num_gaussians, n_classes, seed=args.seed)
    res = train_features(b, views, args.iters, cfg if args.voda else None, seed=args.seed)
    sel = select_object(b, args.object)
    report = {"baseline": args.baseline, "voda": args.voda, "iters": args.iters,
              "iter_ms": res["iter_ms"], "object": args.object, "selected": int(sel.sum()),
              "n_gaussians": model.num_gaussians}
    for name, part in (("removed", remove(model, sel)), ("extracted", extract(model, sel))):
        if part.num_gaussians == 0:
            continue
        r = rasterize(part.means, part.quats, part.scales, part.opacities, part.sh, vm, K, W, H,
                      sh_degree=part.sh_degree)
        for c in range(vm.shape[0]):
            save_image(out / name / f"view_{c:03d}.png", r.colors[c].clamp(0, 1).detach())
    if sc is not None and model.object_ids is not None:
        ev = eval_views(model, sc.n_objects, vm, K, W, H, sc.masks)
        report["metrics"] = evaluate(model, b, ev, objects=[args.object])
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


def main(argv=None) -> int:  # for `python -m gsrender.voda.cli`
    p = argparse.ArgumentParser(prog="gsrender")
    add_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
