"""What VODA changes in a Gaussian Grouping selection on a trained 3DGS model, Gaussian by
Gaussian: the study's `gg` and `gg+voda` runs (studies/voda/trained.py's PROTOCOL, same seeds
and streams) on cached trained scenes, then per object the Gaussians VODA adds to the selection,
where they lie, and the removal error with and without them.

    python studies/voda/flips.py --out out/voda_flips 2000 2001     # scenes of the study cache

Per object k (derived ids: the nearest ground-truth Gaussian's, as in the study):
  added      selected by gg+voda, not by gg;  of them the share whose derived id is k, 0 (the
             background's) or another object, and the share of the background ones lying on the
             floor (z < FLOOR_Z)
  nRDE       gg, gg+voda, and gg+voda without its added background Gaussians (the selection VODA
             would make if it took none of the background's Gaussians)
Writes DIR/voda_flips.json and DIR/voda_flips.md."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gsrender.bench.measure import env_block, mean_ci95
from gsrender.io import atomic
from gsrender.voda import metrics as M
from gsrender.voda.baselines import make_baseline
from gsrender.voda.loss import VodaConfig
from gsrender.voda.select import select_object
from gsrender.voda.train import train_features
from studies import scenes as T
from studies.voda.trained import PROTOCOL, Scene

FLOOR_Z = 0.05  # m: a background Gaussian this close to the floor plane belongs to the floor


def _nrde(sc: Scene, k: int, selected: torch.Tensor) -> float:
    ts, ev = sc.ts, sc.ev
    return M.removal_metrics(ts.model, selected, ts.model.object_ids == k, ev.viewmats, ev.Ks,
                             ev.width, ev.height, ev.masks == k, full=ev.full,
                             expected=ev.expected[k], contribution=ev.contribution)["nrde"]


def scene_flips(sc: Scene) -> list[dict]:
    ts = sc.ts
    sel = {}
    for method, voda in (("gg", None), ("gg+voda", VodaConfig(**PROTOCOL["voda"]))):
        b = make_baseline("gg", ts.model.means, ts.n_objects + 1, len(sc.views), seed=ts.seed)
        train_features(b, sc.views, PROTOCOL["iters"], voda, lr=PROTOCOL["lr"], seed=ts.seed)
        sel[method] = [select_object(b, k) for k in range(1, ts.n_objects + 1)]
    ids, z = ts.model.object_ids, ts.model.means[:, 2]
    rows = []
    for k in range(1, ts.n_objects + 1):
        base, voda = sel["gg"][k - 1], sel["gg+voda"][k - 1]
        added = voda & ~base
        bg = added & (ids == 0)
        n = max(int(added.sum()), 1)
        rows.append({"seed": ts.seed, "split": ts.split, "object": k,
                     "selected_gg": int(base.sum()), "selected_voda": int(voda.sum()),
                     "added": int(added.sum()), "dropped": int((base & ~voda).sum()),
                     "added_object": float((added & (ids == k)).sum()) / n,
                     "added_background": float(bg.sum()) / n,
                     "added_other_object": float((added & (ids > 0) & (ids != k)).sum()) / n,
                     "background_on_floor": float((bg & (z < FLOOR_Z)).sum()) / max(int(bg.sum()), 1),
                     "nrde_gg": _nrde(sc, k, base), "nrde_voda": _nrde(sc, k, voda),
                     "nrde_voda_without_added_background": _nrde(sc, k, voda & ~bg)})
    return rows


KEYS = ("added", "added_object", "added_background", "added_other_object", "background_on_floor",
        "nrde_gg", "nrde_voda", "nrde_voda_without_added_background")


def markdown(res: dict) -> str:
    lines = [(f"Per object, mean ± 95 % interval over {len(res['rows'])} objects of "
              f"{len(res['seeds'])} scenes ({res['split']}, {res['size']} size):"), "",
             "| " + " | ".join(KEYS) + " |", "|" + "---:|" * len(KEYS)]
    lines.append("| " + " | ".join(f"{m:.3f} ± {c:.3f}" for m, c in
                                   (res["summary"][k] for k in KEYS)) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("seeds", nargs="+", type=int)
    ap.add_argument("--size", choices=tuple(T.SIZES), default="full")
    ap.add_argument("--split", default="isolated")
    ap.add_argument("--scenes", type=Path, default=Path("out/trained_scenes"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    rows = []
    for seed in args.seeds:
        ts = T.load_or_train(args.size, seed, args.split, root=args.scenes)
        rows += scene_flips(Scene(ts, VodaConfig(**PROTOCOL["voda"])))
    res = {"size": args.size, "split": args.split, "seeds": args.seeds, "protocol": PROTOCOL,
           "env": env_block(), "rows": rows,
           "summary": {k: list(mean_ci95([r[k] for r in rows])) for k in KEYS}}
    args.out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(args.out / "voda_flips.json", json.dumps(res, indent=1, default=float))
    (args.out / "voda_flips.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
