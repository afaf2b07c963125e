"""SplitGS-Loc on real photos, as a user would run it (skipped when ../shared/data/snowmiku_small is
absent): `gsrender train` fits a 3DGS to the COLMAP scene (held-out views excluded), `gsrender
loc build` lifts a map from the training photos, and `gsrender loc query --intrinsics` localizes
the held-out photos from their intrinsics alone, writing a COLMAP images.txt. The written poses are
then compared with the COLMAP poses (translation in SfM units: the plush spans ~20).

    python studies/loc/snowmiku.py [--steps 300] [--scale 1] [--methods splitgs no_split ...]
        [--out out/loc_snowmiku] [--json out.json] [--scene trained.ply]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from gsrender.io import atomic
from gsrender.io.paths import data_dir

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SNOW = data_dir() / "snowmiku_small"
N_TEST = 4


def _camera_rows(cams, with_pose: bool) -> list[dict]:
    rows = []
    for c in cams:
        r = {"file": c.name, "name": c.name, "width": c.width, "height": c.height,
             "K": c.K.tolist()}
        if with_pose:
            r["viewmat_w2c_opencv"] = c.viewmat.tolist()
        rows.append(r)
    return rows


def sfm_point_model(folder: Path, scale: float = 0.027, opacity: float = 0.9):
    """The SfM points as small isotropic opaque Gaussians (a model that lifts without training)."""
    import numpy as np
    import torch

    from gsrender.scene import GaussianModel, rgb_to_sh

    pts = np.load(folder / "sfm_points.npz")
    xyz, rgb = torch.from_numpy(pts["xyz"]).float(), torch.from_numpy(pts["rgb"]).float() / 255
    N = xyz.shape[0]
    return GaussianModel(means=xyz, quats=torch.tensor([[1.0, 0, 0, 0]]).repeat(N, 1),
                         scales=torch.full((N, 3), scale), opacities=torch.full((N,), opacity),
                         sh=rgb_to_sh(rgb)[:, None, :])


def train_model(folder: Path, out: Path, steps: int, scale: float, threads: int,
                init_ply: Path | None = None) -> float:
    """`gsrender train` with the N_TEST held-out views excluded -> seconds. init_ply: start from
    this model instead of the SfM points (the test's shortcut to an opaque model in few steps)."""
    from gsrender.cli.main import main as cli

    t0 = time.perf_counter()
    assert cli(["train", "--colmap", str(folder), "--n-test", str(N_TEST), "--steps", str(steps),
                "--sh-degree", "0", "--scale", str(scale), "--out", str(out / "train"),
                "--eval-every", "0", "--snapshot-every", "0", "--no-progress",
                "--threads", str(threads)] + (["--init-ply", str(init_ply)] if init_ply else [])) == 0
    return time.perf_counter() - t0


def localize_held_out(folder: Path, scene: Path, out: Path, scale: float = 1.0,
                      methods=("splitgs", "no_split")) -> dict:
    """`gsrender loc build` on the training photos, `gsrender loc query --intrinsics` (no pose)
    on the held-out ones, the written images.txt compared with the COLMAP poses. Translation
    errors in SfM units and relative to the scene extent (3DGS's: 1.1 × the largest distance of
    a training camera from their mean)."""
    from gsrender.cli.main import main as cli
    from gsrender.io import load_colmap_cameras, read_colmap_model
    from gsrender.loc import metrics as LM
    from gsrender.loc.mapfile import load_map
    from gsrender.train.data import camera_extent, holdout_indices

    out.mkdir(parents=True, exist_ok=True)
    cams = load_colmap_cameras(folder / "sparse" / "0", folder / "images")
    cams = [c.resized(max(1, round(c.width * scale)), max(1, round(c.height * scale)))
            for c in cams]  # as `gsrender train --scale` sizes them
    held = holdout_indices(len(cams), n_test=N_TEST)
    train = [c for i, c in enumerate(cams) if i not in held]
    test = [cams[i] for i in held]
    extent = camera_extent([c.viewmat for c in train])
    atomic.write_text(out / "train.json", json.dumps(_camera_rows(train, True)))
    atomic.write_text(out / "queries.json", json.dumps(_camera_rows(test, False)))  # no poses
    res = {"scale": scale, "held_out": [c.name for c in test], "extent_units": extent,
           "image_size": [test[0].width, test[0].height]}
    for name in methods:
        mp = out / f"map_{name}.npz"
        t0 = time.perf_counter()
        assert cli(["loc", "build", "--scene", str(scene), "--cameras-json",
                    str(out / "train.json"), "--images", str(folder / "images"),
                    "--method", name, "--out", str(mp)]) == 0
        t_build = time.perf_counter() - t0
        poses = out / f"poses_{name}"
        assert cli(["loc", "query", "--map", str(mp), "--intrinsics", str(out / "queries.json"),
                    "--images", str(folder / "images"), "--poses-out", str(poses),
                    "--json", str(out / f"query_{name}.json")]) == 0
        _, images = read_colmap_model(poses)
        est = {im.name: im for im in images}
        rows = json.loads((out / f"query_{name}.json").read_text())["queries"]
        te, re = [], []
        for c in test:
            if c.name in est:
                vm = est[c.name].viewmat()
                gt = c.viewmat.double().numpy()
                e = LM.pose_errors(gt[:3, :3], gt[:3, 3], vm[:3, :3], vm[:3, 3])
            else:
                e = (math.inf, math.inf)
            te.append(e[0]), re.append(e[1])
        n_points = int(load_map(mp)[0].points.shape[0])
        res[name] = {"t_err_units": te, "t_err_rel_extent": [x / extent for x in te],
                     "r_err_deg": re, "inliers": [r["inliers"] for r in rows],
                     "matches": [r["matches"] for r in rows], "map_points": n_points,
                     "build_s": t_build}
        print(f"snowmiku {name} ({n_points} map points): t err "
              + ", ".join(f"{x:.3f}" for x in te) + f" units (extent {extent:.2f}); r err "
              + ", ".join(f"{x:.2f}" for x in re) + " deg; inliers/matches "
              + ", ".join(f"{r['inliers']}/{r['matches']}" for r in rows), flush=True)
    return res


def run_real(folder: Path = SNOW, steps: int = 300, out: Path = Path("out/loc_snowmiku"),
             scale: float = 1.0, threads: int = 2, methods=("splitgs", "no_split"),
             init_ply: Path | None = None) -> dict | None:
    if not (folder / "sparse" / "0").is_dir():
        print(f"real-image check skipped: {folder} absent")
        return None
    t_train = train_model(folder, out, steps, scale, threads, init_ply)
    train_results = json.loads((out / "train" / "results.json").read_text())
    res = localize_held_out(folder, Path(train_results["ply"]), out, scale, methods)
    res.update(steps=steps, train_s=t_train, train_results=train_results)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", type=Path, default=Path("out/loc_snowmiku"))
    ap.add_argument("--scale", type=float, default=1.0, help="image scale for training and maps")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--methods", nargs="+", default=["splitgs", "no_split"])
    ap.add_argument("--scene", type=Path,
                    help="skip training: localize with this model (trained with --n-test 4)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.scene:
        res = localize_held_out(SNOW, args.scene, args.out, args.scale, tuple(args.methods))
    else:
        res = run_real(SNOW, args.steps, args.out, args.scale, args.threads, tuple(args.methods))
    if args.json and res is not None:
        atomic.write_text(args.json, json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
