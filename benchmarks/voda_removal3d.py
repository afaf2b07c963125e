"""Removal-3D benchmark (issue #4): both frozen-geometry baselines with and without VODA on
seeded scenes of each split; prints a table per split and writes
{"<baseline>": {"baseline": M, "voda": M}} with `--json PATH`, each M holding
rde, nrde, collateral, gaussian_iou, recall_q1, miou, iter_ms (means over all splits), plus
boundary_iou and "splits": {split: {...}}.

    python benchmarks/voda_removal3d.py --quick [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gsrender.voda import removal3d as R
from gsrender.voda.baselines import BASELINES
from gsrender.voda.evaluate import KEYS, eval_views, evaluate
from gsrender.voda.loss import VodaConfig
from gsrender.voda.train import frozen_views, train_features

METRICS = (*KEYS, "iter_ms")
COLUMNS = ("rde", "nrde", "collateral", "gaussian_iou", "recall_q1", "miou", "iter_ms")
HEADERS = ("RDE", "nRDE", "collat", "G-IoU", "rec-Q1", "mIoU", "it ms")


def run_scene(split: str, seed: int, args, cfg: VodaConfig) -> dict:
    """-> {baseline: {method: metrics}} for one scene."""
    t0 = time.perf_counter()
    sc = R.make_removal3d(split, seed, args.objects, args.width, args.height, args.rings,
                          args.per_ring, args.per_object, rgb_optimised=args.rgb_optimised,
                          refit_iters=args.refit_iters)
    noisy = R.sam_noise(sc.masks, seed)
    views = frozen_views(sc.model, sc.viewmats, sc.Ks, sc.width, sc.height, noisy, cfg)
    evm, evk = R.cameras(sc.width, sc.height, 1, args.per_ring, offset_deg=20.0)
    ev_masks, _ = R.instance_masks(sc.model, sc.n_objects, evm, evk, sc.width, sc.height)
    ev = eval_views(sc.model, sc.n_objects, evm, evk, sc.width, sc.height, ev_masks)
    out = {}
    for bname, cls in BASELINES.items():
        out[bname] = {}
        for method in ("baseline", "voda"):
            b = cls(sc.model.num_gaussians, sc.n_objects + 1, seed=seed)
            res = train_features(b, views, args.iters, cfg if method == "voda" else None,
                                 seed=seed)
            m = evaluate(sc.model, b, ev)
            m["iter_ms"] = res["iter_ms"]
            out[bname][method] = m
    print(f"[{split} seed {seed}] N={sc.model.num_gaussians} objects={sc.n_objects} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def _mean(rows: list[dict]) -> dict:
    return {k: sum(r[k] for r in rows) / len(rows) for k in METRICS}


def table(title: str, res: dict) -> str:
    lines = [f"### {title}", "", "| baseline | method | " + " | ".join(HEADERS) + " |",
             "|---|---|" + "---:|" * len(HEADERS)]
    for bname, methods in res.items():
        for method, m in methods.items():
            lines.append(f"| {bname} | {method} | " + " | ".join(
                f"{m[k]:.1f}" if k == "iter_ms" else f"{m[k]:.3f}" for k in COLUMNS) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one small scene per split (<10 min)")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument("--splits", nargs="+", default=list(R.SPLITS), choices=R.SPLITS)
    ap.add_argument("--seeds", type=int, default=None, help="scenes per split")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--objects", type=int, default=None, help="objects per scene (3-6 random)")
    ap.add_argument("--width", type=int, default=160)
    ap.add_argument("--height", type=int, default=120)
    ap.add_argument("--rings", type=int, default=2)
    ap.add_argument("--per-ring", type=int, default=6)
    ap.add_argument("--per-object", type=int, default=450)
    ap.add_argument("--no-rgb-optimised", dest="rgb_optimised", action="store_false",
                    help="skip the RGB refit of the object Gaussians")
    ap.add_argument("--refit-iters", type=int, default=24)
    ap.add_argument("--k-max", type=int, default=VodaConfig.K_max, help="contributors per pixel")
    ap.add_argument("--n-pixels", type=int, default=VodaConfig.n_pixels,
                    help="VODA pixels per iteration")
    ap.add_argument("--veto", action="store_true",
                    help="VODA with the member veto (VodaConfig.veto; off by default)")
    ap.add_argument("--enclose", action="store_true",
                    help="VODA with the enclosure rule (VodaConfig.enclose; off by default)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: on a small shared machine torch's "
                         "multi-threaded CPU scatter/index_add is far slower than one thread)")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    seeds = args.seeds or (1 if args.quick else 3)
    args.iters = args.iters or (150 if args.quick else 400)
    if args.quick and args.objects is None:
        args.objects = 4
    torch.manual_seed(0)
    cfg = VodaConfig(veto=args.veto, K_max=args.k_max, enclose=args.enclose,
                     n_pixels=args.n_pixels)
    per_split: dict = {}
    t0 = time.perf_counter()
    for split in args.splits:
        scenes = [run_scene(split, seed, args, cfg) for seed in range(seeds)]
        per_split[split] = {b: {m: _mean([s[b][m] for s in scenes]) for m in scenes[0][b]}
                            for b in scenes[0]}
        print(table(f"split: {split}", per_split[split]) + "\n", flush=True)
    splits = list(per_split)
    overall = {b: {m: {**_mean([per_split[s][b][m] for s in splits]),
                       "splits": {s: per_split[s][b][m] for s in splits}}
                   for m in per_split[splits[0]][b]} for b in per_split[splits[0]]}
    print(table("all splits", overall))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; targets: nRDE −40% vs baseline, recall-Q1 "
          f">= 0.8, mIoU drop <= 0.005, iteration time <= 1.5x")
    for b, r in overall.items():
        base, voda = r["baseline"], r["voda"]
        cut = 1 - voda["nrde"] / base["nrde"] if base["nrde"] > 0 else 0.0
        print(f"  {b}: nRDE cut {100 * cut:.0f}%, recall-Q1 {voda['recall_q1']:.2f}, "
              f"mIoU change {voda['miou'] - base['miou']:+.4f}, "
              f"time x{voda['iter_ms'] / max(base['iter_ms'], 1e-9):.2f}")
    if args.json:  # exactly {"<baseline>": {"baseline": M, "voda": M}} (issue #4)
        args.json.write_text(json.dumps(overall, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
