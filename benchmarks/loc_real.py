"""SplitGS-Loc on real photos, as a user would run it (skipped when ../shared/data/snowmiku_small is
absent): `gsrender train` fits a 3DGS to the COLMAP scene (held-out views excluded), `gsrender
loc build` lifts a map from the training photos, and `gsrender loc query --intrinsics` localizes
the held-out photos from their intrinsics alone, writing a COLMAP images.txt. The written poses are
then compared with the COLMAP poses (translation in SfM units: the plush spans ~20).

    python benchmarks/loc_real.py [--steps 300] [--out out/loc_real] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SNOW = Path(os.environ.get("GSRENDER_DATA", ROOT.parent / "shared" / "data")) / "snowmiku_small"
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


def run_real(folder: Path = SNOW, steps: int = 300, out: Path = Path("out/loc_real"),
             methods=("splitgs", "no_split")) -> dict | None:
    if not (folder / "sparse" / "0").is_dir():
        print(f"real-image check skipped: {folder} absent")
        return None
    from gsrender.cli import main as cli
    from gsrender.io import load_colmap_cameras, read_colmap_model
    from gsrender.loc import metrics as LM
    from gsrender.train.data import holdout_indices

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    assert cli(["train", "--colmap", str(folder), "--n-test", str(N_TEST), "--steps", str(steps),
                "--sh-degree", "0", "--out", str(out / "train"), "--eval-every", "0",
                "--snapshot-every", "0", "--no-progress", "--threads", "2"]) == 0
    t_train = time.perf_counter() - t0
    cams = load_colmap_cameras(folder / "sparse" / "0", folder / "images")
    held = holdout_indices(len(cams), n_test=N_TEST)
    train = [c for i, c in enumerate(cams) if i not in held]
    test = [cams[i] for i in held]
    (out / "train.json").write_text(json.dumps(_camera_rows(train, True)))
    (out / "queries.json").write_text(json.dumps(_camera_rows(test, False)))  # no poses
    res = {"steps": steps, "train_s": t_train, "held_out": [c.name for c in test]}
    for name in methods:
        mp = out / f"map_{name}.npz"
        assert cli(["loc", "build", "--scene", str(out / "train" / "point_cloud.ply"),
                    "--cameras-json", str(out / "train.json"), "--images", str(folder / "images"),
                    "--method", name, "--out", str(mp)]) == 0
        poses = out / f"poses_{name}"
        assert cli(["loc", "query", "--map", str(mp), "--intrinsics", str(out / "queries.json"),
                    "--images", str(folder / "images"), "--poses-out", str(poses),
                    "--json", str(out / f"query_{name}.json")]) == 0
        _, images = read_colmap_model(poses)
        est = {im.name: im for im in images}
        rows = json.loads((out / f"query_{name}.json").read_text())["queries"]
        te, re = [], []
        for c, row in zip(test, rows):
            if c.name in est:
                vm = est[c.name].viewmat()
                gt = c.viewmat.double().numpy()
                e = LM.pose_errors(gt[:3, :3], gt[:3, 3], vm[:3, :3], vm[:3, 3])
            else:
                e = (math.inf, math.inf)
            te.append(e[0]), re.append(e[1])
        res[name] = {"t_err_units": te, "r_err_deg": re, "inliers": [r["inliers"] for r in rows]}
        print(f"snowmiku {name}: held-out {[c.name for c in test]}: t err "
              + ", ".join(f"{x:.3f}" for x in te) + " units; r err "
              + ", ".join(f"{x:.2f}" for x in re) + " deg; inliers "
              + ", ".join(str(r["inliers"]) for r in rows), flush=True)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", type=Path, default=Path("out/loc_real"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    res = run_real(SNOW, args.steps, args.out)
    if args.json and res is not None:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
