"""Removal-3D benchmark: the baselines with and without VODA on seeded scenes.

Methods: identity, grouping (identity + Gaussian Grouping's 3D kNN regulariser), distill
(view-dependent 2D features), each with and without VODA, and vote (training-free projection
voting; VODA does not apply). Three modes:

    python studies/voda/removal3d.py --quick [--json out.json]   # 1 scene per split, seed 0
    python studies/voda/removal3d.py --protocol                  # the evaluation (studies/voda/REPORT.md)
    python studies/voda/removal3d.py --measure-plant             # PLANT_HIDDEN_SHARE
    python studies/voda/removal3d.py --protocol --layout extra --resume FIRST.json   # 2nd run
    python studies/voda/removal3d.py --finish RUN.partial.json --json RUN.json      # stopped run
    python studies/voda/removal3d.py --protocol --layout surface|plant_full|sweeps_grouping \
        [--n-seeds N] [--resume EARLIER.json ...]                                   # 3rd run

--quick and plain runs write {"<method>": {"baseline": M, "voda": M}} ("vote": {"baseline": M})
with --json, each M holding the means over all splits of rde, nrde, collateral, gaussian_iou,
recall_q1, miou, boundary_iou, iter_ms and "splits": {split: {...}}. --protocol runs the frozen
PROTOCOL on the evaluation seeds (EVAL_SEEDS, disjoint from TUNING_SEEDS), both scene structures
and the sweeps, and writes per-scene rows, means ± 95 % intervals and the sweep plots.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gsrender.bench.measure import env_block, mean_ci95
from gsrender.io import atomic
from gsrender.io.paths import data_dir
from gsrender.voda import removal3d as R
from gsrender.voda.baselines import TRAINED, VotingBaseline, make_baseline
from gsrender.voda.evaluate import KEYS, eval_views, evaluate
from gsrender.voda.loss import VodaConfig
from gsrender.voda.metrics import HIDDEN_REL, hidden_share
from gsrender.voda.train import frozen_views, train_features

METRICS = (*KEYS, "iter_ms")
COLUMNS = ("rde", "nrde", "collateral", "gaussian_iou", "recall_q1", "miou", "iter_ms")
HEADERS = ("RDE", "nRDE", "collat", "G-IoU", "rec-Q1", "mIoU", "it ms")
METHODS = (*(f"{b}{v}" for b in TRAINED for v in ("", "+voda")), "vote")

# Seeds. The VODA defaults (VodaConfig) were chosen on seeds 0-2 (--quick uses seed 0),
# and the smoke runs used seed 0 only: those are the tuning seeds. The
# evaluation seeds below were never run before the defaults were frozen.
TUNING_SEEDS = (0, 1, 2)
EVAL_SEEDS = (1000, 1001, 1002, 1003, 1004)
# Scene and training sizes of --protocol, frozen with the defaults and shrunk from the --quick
# sizes to fit ~35 min of a 2-core machine shared by ~7 jobs (one training took ~20 s at
# 112x84 / 120 iterations there): 3 objects of 250 Gaussians, floor 800, walls 500, 8 training
# views (2 rings of 4) at 80x60, 4 held-out views, 100 iterations (40 of warm-up, then VODA).
PROTOCOL = {"objects": 3, "per_object": 250, "n_floor": 800, "n_walls": 500, "width": 80,
            "height": 60, "rings": 2, "per_ring": 4, "iters": 100, "refit_iters": 24,
            "rgb_optimised": True}
# structure -> (splits, methods) of the main tables, and the sweeps. Re-scoped when the
# --protocol run at commit 38f461d proved ~4x over the compute budget: fewer splits, methods and
# sweep points; no method default, size or seed changed (its finished rows are reused with
# --resume).
MAIN = {"shells": (("isolated", "occluding"),
                   ("identity", "identity+voda", "grouping", "grouping+voda", "vote")),
        "surface": (("isolated",), ("identity", "identity+voda"))}
SWEEP_SEEDS = EVAL_SEEDS[:3]
SWEEP_METHODS = ("identity", "identity+voda", "vote")
SWEEPS = {  # name -> (SceneParams field or "K_max", values); every sweep on the isolated split
    "size": ("size_scale", (0.5, 1.0, 2.0)),
    "k_max": ("K_max", (48, 96, 192)),
    "distance": ("cam_radius", (2.0, 2.8, 3.4)),
    "shells": ("n_shells", (1, 3, 5)),
}

# The extra layout (--layout extra, same frozen defaults, sizes and seeds): the composite
# scene (the real plant in the room), every method on the touching and thin splits, distill on
# isolated / occluding (the other methods' rows come from the main layout with --resume), and the
# opacity sweep with the strongest baseline (grouping) beside identity.
EXTRA = {"plant": (("isolated",), METHODS),
         "shells": (("touching", "thin", "isolated", "occluding"), METHODS)}
EXTRA_SWEEPS = {"opacity": ("opacity", ((0.5, 0.7), (0.7, 0.9), (0.9, 0.99)))}
EXTRA_SWEEP_METHODS = ("identity", "identity+voda", "grouping", "grouping+voda", "vote")
# The surface / plant_full / sweeps_grouping layouts (same frozen defaults, sizes and seeds): every
# method on the `surface` objects (identity ± VODA come from the main layout with --resume), and
# the undecimated plant (all 113,648 Gaussians, ~8x the decimated one's cost) on the first
# evaluation seeds with --n-seeds, beside the decimated plant of the extra layout on the same
# seeds (same yaw and placement) to measure what decimation changes.
# ... and the sweeps (size, K_max, camera distance, shell count) with the strongest baseline,
# grouping ± VODA, beside identity ± VODA and vote (whose rows come from the main layout's sweep
# JSONs with --resume).
SWEEPS_GROUPING = ("identity", "identity+voda", "grouping", "grouping+voda", "vote")
SURFACE = {"surface": (("isolated", "occluding", "touching", "thin"), METHODS)}
PLANT_FULL = {"plant_full": (("isolated",), ("identity", "identity+voda", "vote"))}
# distill ± VODA (the best VODA variant on the decimated plant) on the undecimated one, added
# last on the first 3 evaluation seeds (--n-seeds 3) as the time allowed
PLANT_FULL_DISTILL = {"plant_full": (("isolated",), ("distill", "distill+voda"))}
LAYOUTS = {"main": (MAIN, SWEEPS, SWEEP_METHODS), "extra": (EXTRA, EXTRA_SWEEPS, EXTRA_SWEEP_METHODS),
           "surface": (SURFACE, {}, ()), "plant_full": (PLANT_FULL, {}, ()),
           "sweeps_grouping": ({}, SWEEPS, SWEEPS_GROUPING),
           "plant_full_distill": (PLANT_FULL_DISTILL, {}, ())}


class Scene:
    """A generated scene with its noisy training masks, frozen views and evaluation views."""

    def __init__(self, split: str, seed: int, a: dict, params: R.SceneParams, cfg: VodaConfig):
        self.sc = R.make_removal3d(split, seed, a["objects"], a["width"], a["height"], a["rings"],
                                   a["per_ring"], a["per_object"],
                                   rgb_optimised=a["rgb_optimised"], refit_iters=a["refit_iters"],
                                   params=params, n_floor=a["n_floor"], n_walls=a["n_walls"])
        sc = self.sc
        self.noisy = R.sam_noise(sc.masks, seed)
        self.views = frozen_views(sc.model, sc.viewmats, sc.Ks, sc.width, sc.height, self.noisy,
                                  cfg)
        evm, evk = R.cameras(sc.width, sc.height, 1, a["per_ring"], offset_deg=20.0,
                             radius=params.cam_radius)
        ev_masks, _ = R.instance_masks(sc.model, sc.n_objects, evm, evk, sc.width, sc.height)
        self.ev = eval_views(sc.model, sc.n_objects, evm, evk, sc.width, sc.height, ev_masks)
        self.hidden = hidden_share(sc.model, sc.viewmats, sc.Ks, sc.width, sc.height,
                                   sc.model.object_ids > 0)

    def run(self, method: str, iters: int, cfg: VodaConfig, seed: int) -> dict:
        sc = self.sc
        if method == "vote":
            b = VotingBaseline(sc.model.means, self.noisy, sc.viewmats, sc.Ks, sc.n_objects + 1)
            m = evaluate(sc.model, b, self.ev)
            m["iter_ms"] = 0.0
            return m
        name, voda = method.removesuffix("+voda"), method.endswith("+voda")
        b = make_baseline(name, sc.model.means, sc.n_objects + 1, len(self.views), seed=seed)
        res = train_features(b, self.views, iters, cfg if voda else None, seed=seed)
        m = evaluate(sc.model, b, self.ev)
        m["iter_ms"] = res["iter_ms"]
        return m


def _mean(rows: list[dict]) -> dict:
    return {k: sum(r[k] for r in rows) / len(rows) for k in METRICS}


def _pair(method: str) -> tuple[str, str]:
    return (method.removesuffix("+voda"), "voda" if method.endswith("+voda") else "baseline")


def table(title: str, res: dict) -> str:
    lines = [f"### {title}", "", "| baseline | method | " + " | ".join(HEADERS) + " |",
             "|---|---|" + "---:|" * len(HEADERS)]
    for bname, methods in res.items():
        for method, m in methods.items():
            lines.append(f"| {bname} | {method} | " + " | ".join(
                f"{m[k]:.1f}" if k == "iter_ms" else f"{m[k]:.3f}" for k in COLUMNS) + " |")
    return "\n".join(lines)


def run_plain(args, a: dict, cfg: VodaConfig) -> int:
    """--quick / plain: means over `--seeds` scenes per split (seeds 0..), tables, --json."""
    per_split: dict = {}
    t0 = time.perf_counter()
    for split in args.splits:
        scenes = []
        for seed in range(args.seeds):
            t1 = time.perf_counter()
            s = Scene(split, seed, a, R.SceneParams(), cfg)
            scenes.append({m: s.run(m, a["iters"], cfg, seed) for m in METHODS})
            print(f"[{split} seed {seed}] N={s.sc.model.num_gaussians} objects={s.sc.n_objects} "
                  f"({time.perf_counter() - t1:.0f} s)", flush=True)
        res: dict = {}
        for m in METHODS:
            b, v = _pair(m)
            res.setdefault(b, {})[v] = _mean([s[m] for s in scenes])
        per_split[split] = res
        print(table(f"split: {split}", res) + "\n", flush=True)
    splits = list(per_split)
    first = per_split[splits[0]]
    overall = {b: {v: {**_mean([per_split[s][b][v] for s in splits]),
                       "splits": {s: per_split[s][b][v] for s in splits}} for v in first[b]}
               for b in first}
    print(table("all splits", overall))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    for b in TRAINED:
        base, voda = overall[b]["baseline"], overall[b]["voda"]
        cut = 1 - voda["nrde"] / base["nrde"] if base["nrde"] > 0 else 0.0
        print(f"  {b}: nRDE cut {100 * cut:.0f}%, recall-Q1 {voda['recall_q1']:.2f}, "
              f"mIoU change {voda['miou'] - base['miou']:+.4f}, "
              f"time x{voda['iter_ms'] / max(base['iter_ms'], 1e-9):.2f}")
    if args.json:
        atomic.write_text(args.json, json.dumps(overall, indent=2))
    return 0


def summarise(rows: list[dict], methods) -> dict:
    """{"n": scenes, "hidden_share": [mean, ci95], "methods": {method: {metric: [mean, ci95],
    "delta": {metric: [mean, ci95]} of the paired VODA − same-baseline differences}}}."""
    out: dict = {"n": len(rows),
                 "hidden_share": list(mean_ci95([r["hidden_share"] for r in rows])),
                 "methods": {}}
    for m in methods:
        out["methods"][m] = {k: list(mean_ci95([r[m][k] for r in rows])) for k in METRICS}
        b = m.removesuffix("+voda")
        if m.endswith("+voda") and b in methods:
            out["methods"][m]["delta"] = {k: list(mean_ci95([r[m][k] - r[b][k] for r in rows]))
                                          for k in ("nrde", "rde", "collateral", "recall_q1",
                                                    "miou")}
    return out


def run_protocol(args, a: dict, cfg: VodaConfig) -> int:
    from tqdm import tqdm

    torch.manual_seed(0)
    params0 = R.SceneParams()
    layout, sweeps, sweep_methods = LAYOUTS[args.layout]
    seeds = EVAL_SEEDS[:args.n_seeds] if args.n_seeds else EVAL_SEEDS
    main_cells = [] if args.sweeps else [(st, sp, sd) for st, (splits, _) in layout.items()
                                         for sp in splits for sd in seeds]
    sweep_cells = []  # seed-major within a sweep: the K_max points share one scene per seed
    for name, (field, values) in sweeps.items():
        if args.sweeps and name not in args.sweeps:
            continue
        for sd in SWEEP_SEEDS:
            for v in values:
                p = params0 if field == "K_max" else replace(params0, **{field: v})
                c = replace(cfg, K_max=v) if field == "K_max" else cfg
                sweep_cells.append((name, v, p, c, sd))
    n_units = sum(len(layout[c[0]][1]) for c in main_cells) + len(sweep_cells) * len(sweep_methods)
    bar = tqdm(total=n_units, ascii=True, mininterval=20, file=sys.stdout, desc="removal3d")
    current: dict = {}  # the scene being run: one scene's views in memory at a time
    hidden: dict = {}   # (split, seed, params) -> hidden share
    memo: dict = {}     # (split, seed, params, method, K_max) -> metrics (sweep points shared)

    def scene(split, seed, params):
        key = (split, seed, params)
        if key not in current:
            current.clear()
            current[key] = Scene(split, seed, a, params, cfg)
            hidden[key] = current[key].hidden
        return current[key]

    results: dict = {"env": env_block(), "protocol": PROTOCOL, "eval_seeds": seeds,
                     "tuning_seeds": TUNING_SEEDS, "sweep_seeds": SWEEP_SEEDS,
                     "voda_config": asdict(cfg), "scene_params": asdict(params0),
                     "plant_hidden_share": R.PLANT_HIDDEN_SHARE, "layout": layout, "sweep_grid": sweeps,
                     "main": {}, "sweeps": {}}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    partial = args.json.with_suffix(".partial.json")
    for path in args.resume or ():  # finished rows of earlier runs of this protocol
        old = json.loads(path.read_text())
        for st, per_split in old["main"].items():
            for sp, rows in per_split.items():
                for r in rows:
                    p = replace(params0, structure=st)
                    hidden[(sp, r["seed"], p)] = r["hidden_share"]
                    for m in METHODS:
                        if m in r:
                            memo[(sp, r["seed"], p, m, cfg.K_max)] = r[m]
        for name, rows in old.get("sweeps", {}).items():  # sweep points (same keys as below)
            field = old["sweep_grid"][name][0]
            for r in rows:
                v = tuple(r["value"]) if isinstance(r["value"], list) else r["value"]
                p = params0 if field == "K_max" else replace(params0, **{field: v})
                hidden[("isolated", r["seed"], p)] = r["hidden_share"]
                for m in METHODS:
                    if m in r:
                        k = v if field == "K_max" and m.endswith("+voda") else cfg.K_max
                        memo[("isolated", r["seed"], p, m, k)] = r[m]
    t0 = time.perf_counter()
    for st, sp, sd in main_cells:
        p = replace(params0, structure=st)
        row = {"seed": sd}
        for m in layout[st][1]:
            key = (sp, sd, p, m, cfg.K_max)
            if key not in memo:
                memo[key] = scene(sp, sd, p).run(m, a["iters"], cfg, sd)
            row[m] = memo[key]
            bar.update()
        if (sp, sd, p) not in hidden:
            scene(sp, sd, p)
        row["hidden_share"] = hidden[(sp, sd, p)]
        results["main"].setdefault(st, {}).setdefault(sp, []).append(row)
        atomic.write_text(partial, json.dumps(results, default=str))  # a killed run keeps its rows
    for name, v, p, c, sd in sweep_cells:
        keys = {m: ("isolated", sd, p, m, c.K_max if m.endswith("+voda") else cfg.K_max)
                for m in sweep_methods}
        for m, key in keys.items():
            if key not in memo:
                memo[key] = scene("isolated", sd, p).run(m, a["iters"], c, sd)
            bar.update()
        if ("isolated", sd, p) not in hidden:
            scene("isolated", sd, p)
        row = {"value": v, "seed": sd, "hidden_share": hidden[("isolated", sd, p)],
               **{m: memo[k] for m, k in keys.items()}}
        results["sweeps"].setdefault(name, []).append(row)
        atomic.write_text(partial, json.dumps(results, default=str))
    bar.close()
    results["seconds"] = time.perf_counter() - t0
    finish(results, args.json, args.images)
    partial.unlink()
    return 0


def finish(results: dict, json_path: Path, images: Path, main_stem: str | None = None) -> None:
    """Summaries (means ± 95 % intervals) of the rows a protocol run finished (all of them, or
    those of a stopped run's .partial.json), the JSON, its .md tables and the plots."""
    from studies.voda.report import write_report

    results["summary"] = {}
    for st, d in results["main"].items():
        ms = results["layout"][st][1]
        results["summary"][st] = {sp: summarise(rows, ms) for sp, rows in d.items()}
        if len(d) > 1:
            results["summary"][st]["all"] = summarise([r for rows in d.values() for r in rows],
                                                      ms)
    results["sweep_summary"] = {}
    for name, rows in results["sweeps"].items():
        methods = [k for k in rows[0] if k not in ("value", "seed", "hidden_share")]
        values = [v for v in results["sweep_grid"][name][1] if any(r["value"] == v for r in rows)]
        results["sweep_summary"][name] = [
            {"value": v, **summarise([r for r in rows if r["value"] == v], methods)}
            for v in values]
    atomic.write_text(json_path, json.dumps(results, indent=1, default=str))
    print(f"wrote {json_path} ({results.get('seconds', float('nan')):.0f} s)")
    write_report(results, images, json_path.with_suffix(".md"), main_stem)


def plant_hidden_share(path: Path) -> float:
    """Share of a trained .splat's Gaussians (upright along −y, like the shared plant) with
    near-zero Σw over 2 rings of 12 orbit views (elevations 10° and 50°) at 160x120."""
    from gsrender.cameras import scene_orbit
    from gsrender.io import load_splat

    model = load_splat(path)
    cams = [c for el in (10.0, 50.0) for c in scene_orbit(model.means, 12, 160, 120, 60.0, "-y",
                                                          elevation_deg=el)]
    vm = torch.stack([torch.as_tensor(c.viewmat, dtype=torch.float32) for c in cams])
    K = torch.stack([torch.as_tensor(c.K, dtype=torch.float32) for c in cams])
    return hidden_share(model, vm, K, 160, 120)


def measure_plant(path: Path) -> int:
    share = plant_hidden_share(path)
    print(json.dumps({"scene": str(path), "views": 24, "hidden_share": round(share, 4),
                      "rule": f"sum of rendered weights < {HIDDEN_REL} x median"}))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one small scene per split (<10 min)")
    ap.add_argument("--protocol", action="store_true",
                    help="the frozen evaluation: EVAL_SEEDS, both structures, all sweeps")
    ap.add_argument("--measure-plant", type=Path, nargs="?", default=None,
                    const=data_dir() / "plant/plant.splat",
                    help="print the hidden share of a trained .splat (default: the shared plant)")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument("--layout", choices=tuple(LAYOUTS), default="main",
                    help="--protocol: the main tables and sweeps (main), the extra ones "
                         "(extra: composite plant scene, touching / thin, distill, opacity), "
                         "surface (every method on `surface`) or plant_full (the "
                         "undecimated plant)")
    ap.add_argument("--n-seeds", type=int, default=None,
                    help="--protocol: only the first N evaluation seeds (a subset run)")
    ap.add_argument("--sweeps", nargs="+", default=None, choices=(*SWEEPS, *EXTRA_SWEEPS),
                    help="--protocol: run only these sweeps (no main tables)")
    ap.add_argument("--resume", type=Path, nargs="+", default=None,
                    help="--protocol: reuse the finished rows (main tables and sweep points) of "
                         "these (partial) JSONs")
    ap.add_argument("--finish", type=Path, default=None, metavar="PARTIAL",
                    help="summarise the rows of a stopped --protocol run's .partial.json into "
                         "--json (tables, plots; --main-plot STEM also plots the main tables)")
    ap.add_argument("--main-plot", default=None, metavar="STEM")
    ap.add_argument("--images", type=Path, default=Path("docs/images"),
                    help="--protocol: folder of the sweep plots")
    ap.add_argument("--splits", nargs="+", default=list(R.SPLITS), choices=R.SPLITS)
    ap.add_argument("--seeds", type=int, default=None, help="scenes per split (seeds 0..)")
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
    ap.add_argument("--k-max", type=int, default=VodaConfig.K_max,
                    help="plain runs: contributors per pixel (--protocol: the frozen default)")
    ap.add_argument("--n-pixels", type=int, default=VodaConfig.n_pixels,
                    help="plain runs: VODA pixels per iteration")
    ap.add_argument("--veto", action="store_true", help="plain runs: VodaConfig.veto")
    ap.add_argument("--enclose", action="store_true", help="plain runs: VodaConfig.enclose")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: on a small shared machine torch's "
                         "multi-threaded CPU scatter/index_add is far slower than one thread)")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    if args.measure_plant is not None:
        return measure_plant(args.measure_plant)
    if args.finish:
        if args.json is None:
            ap.error("--finish needs --json")
        finish(json.loads(args.finish.read_text()), args.json, args.images, args.main_plot)
        return 0
    if args.n_seeds is not None and not 1 <= args.n_seeds <= len(EVAL_SEEDS):
        ap.error(f"--n-seeds must be in [1, {len(EVAL_SEEDS)}], got {args.n_seeds}")
    if args.protocol:  # the frozen defaults, whatever the flags say
        args.json = args.json or Path("benchmarks/results/voda_protocol.json")
        return run_protocol(args, dict(PROTOCOL), VodaConfig())
    cfg = VodaConfig(K_max=args.k_max, n_pixels=args.n_pixels, veto=args.veto,
                     enclose=args.enclose)
    args.seeds = args.seeds or (1 if args.quick else 3)
    a = {"objects": args.objects or (4 if args.quick else None), "per_object": args.per_object,
         "n_floor": 1600, "n_walls": 900, "width": args.width, "height": args.height,
         "rings": args.rings, "per_ring": args.per_ring,
         "iters": args.iters or (150 if args.quick else 400), "refit_iters": args.refit_iters,
         "rgb_optimised": args.rgb_optimised}
    torch.manual_seed(0)
    return run_plain(args, a, cfg)


if __name__ == "__main__":
    raise SystemExit(main())
