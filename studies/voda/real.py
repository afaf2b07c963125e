"""The Removal-3D objects of a real trained 3DGS (the Mip-NeRF 360 bonsai) and their premise figures.

The model is the one `make bench-real` trains from the committed SfM model (out/bench_real/model/
bonsai, 7,000 steps of `--preset 3dgs`); the objects are the boxes of data/scenes/bonsai/
objects.json (studies.voda.real_objects): a Gaussian belongs to the first object whose box holds
its mean. The premise figures are the synthetic study's (studies/voda/REPORT.md): the share of
each object's Gaussians that are hidden — rendered weight summed over the training views under
HIDDEN_REL of the median Gaussian's — the Gaussians a contribution-weighted method cannot
supervise and VODA's volumetric term is meant to reach.

    python -m studies.voda.real [--model out/bench_real/model/bonsai] [--scene out/bench_real/bonsai]

writes benchmarks/results/voda_real_premise.json.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from studies.voda import real_objects

ROOT = Path(__file__).resolve().parents[2]
SCENE = "bonsai"


def object_ids(means: np.ndarray, boxes: dict[str, real_objects.Box3D]) -> np.ndarray:
    """[N] int: 1 + the index of the first box (objects.json order) holding each mean, 0 for none."""
    ids = np.zeros(len(means), np.int64)
    for k, box in enumerate(boxes.values(), start=1):
        ids[(ids == 0) & box.contains(means)] = k
    return ids


def premise(model, cameras, boxes: dict[str, real_objects.Box3D]) -> dict:
    """Gaussian counts and hidden shares, of the whole model and of each object."""
    from gsrender.loc.stats import weight_stats
    from gsrender.voda.metrics import HIDDEN_REL, hidden_mask

    vms = torch.stack([c.viewmat for c in cameras])
    Ks = torch.stack([c.K for c in cameras])
    stats = weight_stats(model, vms, Ks, cameras[0].width, cameras[0].height)
    hidden = hidden_mask(stats.w_sum).numpy()
    ids = object_ids(model.means.double().numpy(), boxes)
    rows = {"all": {"gaussians": int(len(ids)), "hidden_share": float(hidden.mean())}}
    for k, name in enumerate(boxes, start=1):
        sel = ids == k
        rows[name] = {"gaussians": int(sel.sum()), "hidden_share": float(hidden[sel].mean()) if sel.any() else None}
    return {"hidden_rel": HIDDEN_REL, "views": len(cameras), "objects": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, default=ROOT / "out" / "bench_real" / "model" / SCENE)
    p.add_argument("--scene", type=Path, default=ROOT / "out" / "bench_real" / SCENE)
    p.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "voda_real_premise.json")
    args = p.parse_args(argv)
    from gsrender.bench.measure import git_commit, machine
    from gsrender.io.atomic import write_json
    from gsrender.io.mipnerf360 import load_mipnerf360_scene

    if not (args.model / "point_cloud").is_dir():
        raise SystemExit(f"no trained model under {args.model}: `make bench-real` trains it")
    d = load_mipnerf360_scene(args.scene, "images", split="train", model_root=args.model)
    t0 = time.perf_counter()
    res = premise(d["model"], d["cameras"], real_objects.load_objects(SCENE))
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["model"] = str(d["model"].meta.get("source", args.model))
    write_json(args.json, {"command": "python -m studies.voda.real", "machine": machine(),
                           "commit": git_commit()[:12],
                           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "result": res},
               indent=1)
    for name, r in res["objects"].items():
        print(f"{name}: {r['gaussians']:,} Gaussians, hidden share {r['hidden_share']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
