"""Removal-3D on a real trained 3DGS (the Mip-NeRF 360 bonsai): every method of the synthetic
study with and without VODA, the multi-view agreement readout, the oracle, paired differences over
objects × seeds, and each object's removal rendered from a held-out view, method by method.

The model is the one `make bench-real` trains from the committed SfM model (out/bench_real/model/
bonsai, `--preset 3dgs`), pinned to one iteration (--iteration, default 7000) so that a longer run
in the same folder does not change the study. The objects are the boxes of
data/scenes/bonsai/objects.json (studies.voda.real): a Gaussian belongs to the first object whose
box holds its mean, and that set is the object's ground truth. Training masks are rendered from
those sets (the dominant object id per pixel) and corrupted with the synthetic study's SAM-like
noise; the removal ground truth is the model without the true set, so the oracle row is 0 by
construction and every other row measures how far its removal lands from it: RDE / nRDE over the
object's mask, and over the pixels whose depth the true removal changes (-change: in or out of the
mask, gsrender.voda.metrics.depth_change).

Nothing here is chosen on this scene: the methods and their settings are the synthetic study's
frozen ones (studies/voda/trained.py PROTOCOL, studies/voda/faithful.py FROZEN), and the view
subsets below were fixed from the cost of one view before any row ran. Seeds are feature-training
seeds (SAM-like noise, view order, kNN samples); the model is the same for all.

    python -m studies.voda.real_removal [--model out/bench_real/model/bonsai]
        [--scene out/bench_real/bonsai] [--iteration 7000] [--seeds 0 1 2] [--out out/voda_real]
        [--json benchmarks/results/voda_real.json] [--figure docs/images/voda_real_removal.png]
    python -m studies.voda.real_removal --quick --out out/voda_real_quick    # a smoke run

Each seed's rows are kept in OUT/results.partial.json; a rerun with the same OUT skips the seeds
already there (the study can be stopped between seeds).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gsrender.bench.measure import env_block, fmt_ci, mean_ci95
from gsrender.io import atomic
from gsrender.voda.evaluate import OBJECT_KEYS
from gsrender.voda.loss import VodaConfig
from studies import scenes as T
from studies.voda import faithful as F
from studies.voda import real_objects
from studies.voda.real import SCENE, object_ids
from studies.voda.trained import PROTOCOL, QUICK

ITERATION = 7000
# the photos' cameras at 1/8 of the 798×531 undistorted size (100×66): projecting the 1 M
# Gaussians dominates a view's cost (~0.6 s), and every row renders each held-out view once per
# object, twice (its readout and the agreement readout)
IMAGES = "images_8"
# every 4th training camera (64 of 255): frozen projections of a 1 M-Gaussian model hold ~50 MB a
# view; PROTOCOL's 300 iterations are ~4.7 epochs of them (3 of 100 views in the synthetic study)
TRAIN_EVERY = 4
SEEDS = (0, 1, 2)
METHODS = ("oracle", "gg", "gg+voda", "grouping", "grouping+voda", "vote")
QUICK_METHODS = ("oracle", "gg", "gg+voda", "vote")
QUICK_SIZE = {"train_every": 32, "test_every": 8, "iters": 12}  # a smoke run: minutes
# the removal figure: rendered at 1/2 of the photos' size, from the held-out view in which the
# smallest object covers the most pixels of the clean masks (a rule on the ground truth only)
FIGURE_IMAGES = "images_2"
FIGURE_ROWS = ("oracle", "gg", "gg+voda", "grouping", "grouping+voda", "vote")
METRICS = (*F.METRICS[:2], "nrde_change", *F.METRICS[2:4], "rde_change", *F.METRICS[4:])
HEADERS = (*F.HEADERS[:2], "nRDE-change", *F.HEADERS[2:4], "RDE-change", *F.HEADERS[4:])


@dataclass
class RealScene:
    """The trained model with its object ids, and the cameras of the study's views."""

    ts: T.TrainedScene          # seed 0; replace(ts, seed=s) for another seed
    names: list[str]            # object names, id k is names[k - 1]
    test_names: list[str]       # the held-out photos' names


def _cams(cameras):
    return (torch.stack([c.viewmat for c in cameras]), torch.stack([c.K for c in cameras]),
            cameras[0].width, cameras[0].height)


def load_scene(scene: Path, model_root: Path, iteration: int, train_every: int = TRAIN_EVERY,
               test_every: int = 1, images: str = IMAGES) -> RealScene:
    from gsrender.io.mipnerf360 import load_mipnerf360_scene

    tr = load_mipnerf360_scene(scene, images, split="train", model_root=model_root,
                               iteration=iteration)
    te = load_mipnerf360_scene(scene, images, split="test", model_root=scene)  # cameras only
    model = tr["model"]
    if model is None:
        raise SystemExit(f"no trained model under {model_root}: `make bench-real` trains it")
    source = str(model.meta.get("source", ""))
    if f"iteration_{iteration}" not in source:
        raise SystemExit(f"--iteration {iteration}: {model_root} has no iteration_{iteration} "
                         f"(the latest is {source})")
    boxes = real_objects.load_objects(SCENE)
    ids = object_ids(model.means.double().numpy(), boxes)
    model = replace(model, object_ids=torch.from_numpy(ids))
    return make_scene(model, list(boxes), *_cams(tr["cameras"][::train_every])[:2],
                      *_cams(te["cameras"][::test_every]),
                      [Path(p).name for p in te["image_paths"][::test_every]])


def make_scene(model, names: list[str], vm_tr, k_tr, vm_te, k_te, width: int, height: int,
               test_names: list[str]) -> RealScene:
    """The model as its own ground truth (object_ids 1..len(names)): clean masks and depths of the
    training [C,4,4] / [C,3,3] and held-out cameras."""
    n = len(names)
    ts = T.TrainedScene(size="real", seed=0, split="real", gt=model, n_objects=n, model=model,
                        train=T.render_views(model, n, vm_tr, k_tr, width, height),
                        test=T.render_views(model, n, vm_te, k_te, width, height), width=width,
                        height=height, report={})
    return RealScene(ts, names, test_names)


def scene_row(rs: RealScene, seed: int, hidden: dict) -> dict:
    """faithful.summarise's scene fields: each object's Gaussian count and hidden share."""
    ids = rs.ts.model.object_ids
    return {"split": "real", "seed": seed, "psnr_test": float("nan"),
            "trained": {f"object_{k}": {"name": name, "gaussians": int((ids == k).sum()),
                                        "hidden_share": hidden[k]}
                        for k, name in enumerate(rs.names, start=1)}}


def run_seed(rs: RealScene, seed: int, p: dict, methods) -> tuple[dict, dict]:
    """One feature-training seed: (its row as faithful.summarise reads it, the selections per
    method and object)."""
    ts = replace(rs.ts, seed=seed)
    sel: dict = {}
    rows = F.scene_methods(ts, p, methods, keep=sel)
    return {"scene": scene_row(rs, seed, rows.pop("hidden_share")), **rows}, sel


def per_object_delta(rows: list[dict], a: str, b: str, objects) -> dict:
    """Paired a − b over every (seed, object) that ran both rows: mean ± 95 % interval per key."""
    keys = [k for k in OBJECT_KEYS if k in next(iter(rows[0]["methods"][a]["objects"].values()))]
    pairs = [(r["methods"][a]["objects"][str(k)], r["methods"][b]["objects"][str(k)])
             for r in rows if a in r["methods"] and b in r["methods"] for k in objects]
    return {"n": len(pairs), **{key: list(mean_ci95([x[key] - y[key] for x, y in pairs]))
                                for key in keys}}


def per_object_means(rows: list[dict], m: str, k: int) -> dict:
    """Mean ± 95 % interval over seeds of row m's figures on object k."""
    vals = [r["methods"][m]["objects"][str(k)] for r in rows if m in r["methods"]]
    return {key: list(mean_ci95([v[key] for v in vals])) for key in vals[0]}


def summarise(rows: list[dict], methods, names: list[str]) -> dict:
    """faithful.summarise (over seeds) with the real study's extra keys, the paired differences
    over objects × seeds, and each object's means."""
    s = F.summarise(rows, methods)
    objects = range(1, len(names) + 1)
    for m, v in s["methods"].items():
        rs = [r for r in rows if m in r["methods"]]
        for key in ("nrde_change", "rde_change"):
            v[key] = list(mean_ci95([r["methods"][m][key] for r in rs]))
    for d in s["delta"]:
        a, b = d.split(" − ")
        rs = [r for r in rows if a in r["methods"] and b in r["methods"]]
        for key in ("nrde_change", "rde_change"):
            s["delta"][d][key] = list(mean_ci95([r["methods"][a][key] - r["methods"][b][key]
                                                 for r in rs]))
    s["delta_objects"] = {f"{a} − {b}": per_object_delta(rows, a, b, objects)
                          for a, b in F.pairs(methods)}
    # each object on its own, over seeds: a mean over objects can hide opposite signs
    s["delta_by_object"] = {name: {f"{a} − {b}": per_object_delta(rows, a, b, [k])
                                   for a, b in F.pairs(methods) if "+voda" in a}
                            for k, name in zip(objects, names)}
    names_all = [x for m in methods for x in (m, m + F.AGREE)]
    s["objects"] = {name: {m: per_object_means(rows, m, k) for m in names_all
                           if any(m in r["methods"] for r in rows)}
                    for k, name in zip(objects, names)}
    return s


def markdown(res: dict) -> str:
    s = res["summary"]
    names = res["objects"]
    counts = res["rows"][0]["scene"]["trained"]
    lines = [f"# Removal-3D on the real bonsai model ({res['gaussians']:,} Gaussians, iteration "
             f"{res['iteration']}; {len(res['seeds'])} feature-training seeds × {len(names)} objects)",
             "",
             "Objects (true set: the Gaussians whose mean lies in the box): "
             + ", ".join(f"{v['name']} {v['gaussians']:,} (hidden {100 * v['hidden_share']:.2f} %)"
                         for v in counts.values())
             + f". Views: {res['views']['train']} training cameras, {res['views']['test']} held-out "
             f"ones, at {res['views']['width']}×{res['views']['height']}. Mean ± 95 % interval over "
             f"seeds; -change: on the pixels whose depth the true removal changes; *: against the "
             f"box-derived sets; [agree]: the multi-view agreement readout.", "",
             *([F.gate(s), ""] if F.gate(s) else []),
             "| row | " + " | ".join(HEADERS) + " |", "|---|" + "---:|" * len(HEADERS)]
    for m, v in s["methods"].items():
        lines.append(f"| {m} | " + " | ".join(fmt_ci(v[k]) for k in METRICS) + " |")
    keys = ("nrde", "nrde_change", "rde_raw", "rde_change", "gaussian_iou", "recall_q1")
    heads = ("ΔnRDE", "ΔnRDE-change", "ΔRDE", "ΔRDE-change", "ΔG-IoU*", "Δrec-Q1*")
    lines += ["", "Paired differences over objects × seeds (n pairs):", "",
              "| paired difference | n | " + " | ".join(heads) + " |",
              "|---|---:|" + "---:|" * len(heads)]
    for d, v in s["delta_objects"].items():
        lines.append(f"| {d} | {v['n']} | " + " | ".join(fmt_ci(v[k]) for k in keys) + " |")
    lines += ["", "VODA's paired differences object by object (over seeds):", "",
              "| object | paired difference | n | " + " | ".join(heads) + " |",
              "|---|---|---:|" + "---:|" * len(heads)]
    for name, ds in s.get("delta_by_object", {}).items():
        lines += [f"| {name} | {d} | {v['n']} | " + " | ".join(fmt_ci(v[k]) for k in keys) + " |"
                  for d, v in ds.items()]
    for name, rows in s["objects"].items():
        lines += ["", f"{name} (mean over seeds):", "",
                  "| row | nRDE | nRDE-change | RDE | G-IoU* | rec-Q1* |", "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {m} | " + " | ".join(fmt_ci(v[k]) for k in ("nrde", "nrde_change", "rde_raw",
                                                                "gaussian_iou", "recall_q1")) + " |"
                  for m, v in rows.items() if not m.endswith(F.AGREE)]
    if res.get("true_part"):
        cut, first = res["true_part"], res["rows"][0]["methods"]
        meths = list(next(iter(cut.values())))
        lines += ["", f"Seed {res['seeds'][0]}'s selections as they are and cut to the true set "
                  "(selection ∩ true set: its Gaussians outside the set dropped), nRDE:", "",
                  "| object | " + " | ".join(f"{m} | {m} ∩ true" for m in meths) + " |",
                  "|---|" + "---:|---:|" * len(meths)]
        for k, (name, rows) in enumerate(cut.items(), start=1):
            lines.append(f"| {name} | " + " | ".join(
                f"{first[m]['objects'][str(k)]['nrde']:.3f} | {rows[m]['nrde']:.3f}" for m in meths) + " |")
    diag = {m: v for m, v in s["diagnostics"].items() if "missed" in v}
    if diag:
        lines += ["", "Missed Gaussians of the true set (per object) and their shares by training-view "
                  "contribution quartile (q1 lowest) and hidden:", "",
                  "| row | " + " | ".join(F.MISSED) + " |", "|---|" + "---:|" * len(F.MISSED)]
        lines += [f"| {m} | " + " | ".join(fmt_ci(v[k]) for k in F.MISSED) + " |" for m, v in diag.items()]
    return "\n".join(lines) + "\n"


def true_part(rs: RealScene, sel: dict) -> dict:
    """Each row's removal with its selection cut to the true set (selection ∩ truth), object by
    object on the held-out views: what its Gaussians outside the true set cost it.
    -> {object name: {method: {nrde, rde_raw, nrde_change}}}"""
    from gsrender.voda import metrics as M

    ts = rs.ts
    m, te, W, H = ts.model, ts.test, ts.width, ts.height
    full = M.expected_depth(m, te.viewmats, te.Ks, W, H)
    out = {}
    for k, name in enumerate(rs.names, start=1):
        truth = m.object_ids == k
        exp = ts.removal_depth(k)
        out[name] = {}
        for meth, xs in sel.items():
            if meth == "oracle":
                continue
            r = M.removal_metrics(m, xs[k - 1] & truth, truth, te.viewmats, te.Ks, W, H,
                                  te.labels == k, full=full, expected=exp)
            out[name][meth] = {key: r[key] for key in ("nrde", "rde_raw", "nrde_change")}
    return out


def save_selections(path: Path, sel: dict) -> None:
    """method -> [bool [N] per object], bit-packed."""
    arrays = {f"{m}|{k}": np.packbits(x.numpy()) for m, xs in sel.items() for k, x in enumerate(xs)}
    n = next(iter(sel.values()))[0].numel()
    with atomic.atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez_compressed(f, n=np.int64(n), **arrays)


def load_selections(path: Path) -> dict:
    if not path.is_file():
        return {}
    z = np.load(path)
    n, by = int(z["n"]), {}
    for key in (k for k in z.files if k != "n"):
        m, k = key.rsplit("|", 1)
        by.setdefault(m, {})[int(k)] = torch.from_numpy(np.unpackbits(z[key])[:n].astype(bool))
    return {m: [xs[k] for k in sorted(xs)] for m, xs in by.items()}


def figure_view(ts: T.TrainedScene) -> int:
    """The held-out view in which the smallest object (by clean-mask pixels over all held-out
    views) covers the most pixels."""
    labels = ts.test.labels
    px = torch.stack([(labels == k).flatten(1).sum(1) for k in range(1, ts.n_objects + 1)])  # [n, C]
    smallest = int(px.sum(1).argmin())
    return int(px[smallest].argmax())


def removal_figure(rs: RealScene, sel: dict, scene: Path, path: Path, rows=FIGURE_ROWS) -> dict:
    """Each object's removal by each row, rendered from one held-out photo's camera at
    FIGURE_IMAGES: columns the full model and the rows, one line per object."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gsrender.io.mipnerf360 import load_mipnerf360_scene
    from gsrender.render import rasterize

    view = figure_view(rs.ts)
    te = load_mipnerf360_scene(scene, FIGURE_IMAGES, split="test", model_root=scene)
    cam = next(c for c, p in zip(te["cameras"], te["image_paths"])
               if Path(p).name == rs.test_names[view])
    model = rs.ts.model

    def render(keep: torch.Tensor) -> np.ndarray:
        m = model.subset(keep)
        with torch.no_grad():
            out = rasterize(m.means, m.quats, m.scales, m.opacities, m.sh, cam.viewmat[None],
                            cam.K[None], cam.width, cam.height, sh_degree=m.sh_degree)
        return out.colors[0].clamp(0, 1).numpy()

    rows = [r for r in rows if r in sel]
    n = len(rs.names)
    fig, axes = plt.subplots(n, len(rows) + 1, figsize=(2.6 * (len(rows) + 1), 1.9 * n),
                             squeeze=False)
    full = render(torch.ones(model.num_gaussians, dtype=torch.bool))
    for k, name in enumerate(rs.names, start=1):
        axes[k - 1, 0].imshow(full)
        axes[k - 1, 0].set_ylabel(name, fontsize=9)
        for j, m in enumerate(rows, start=1):
            axes[k - 1, j].imshow(render(~sel[m][k - 1]))
    for j, title in enumerate(("model", *rows)):
        axes[0, j].set_title(title if title != "oracle" else "oracle (true set)", fontsize=9)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"Each object removed, held-out photo {rs.test_names[view]} (seed 0's selections)",
                 fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic.atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=90, format="png")
    plt.close(fig)
    return {"view": rs.test_names[view], "size": [cam.width, cam.height], "rows": list(rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=ROOT / "out" / "bench_real" / "model" / SCENE)
    ap.add_argument("--scene", type=Path, default=ROOT / "out" / "bench_real" / SCENE)
    ap.add_argument("--iteration", type=int, default=ITERATION)
    ap.add_argument("--seeds", type=int, nargs="+", default=None)
    ap.add_argument("--methods", nargs="+", default=None, choices=F.KNOWN)
    ap.add_argument("--quick", action="store_true", help="a smoke run: few views, iterations, rows")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "voda_real")
    ap.add_argument("--json", type=Path, default=None,
                    help="the results record (default benchmarks/results/voda_real.json; none with --quick)")
    ap.add_argument("--figure", type=Path, default=None,
                    help="the removal figure (default docs/images/voda_real_removal.png; OUT/ with --quick)")
    args = ap.parse_args(argv)
    seeds = args.seeds or ([SEEDS[0]] if args.quick else list(SEEDS))
    methods = tuple(args.methods or (QUICK_METHODS if args.quick else METHODS))
    p = {**PROTOCOL, "voda": {**PROTOCOL["voda"], **F.FROZEN}}
    size = {"train_every": TRAIN_EVERY, "test_every": 1, "iters": p["iters"]}
    if args.quick:
        size = QUICK_SIZE
        p = {**p, "iters": size["iters"], "voda": {**p["voda"], "warmup": QUICK["voda"]["warmup"] // 4}}
    json_path = args.json or (None if args.quick else ROOT / "benchmarks" / "results" / "voda_real.json")
    fig_path = args.figure or (args.out / "removal.png" if args.quick
                               else ROOT / "docs" / "images" / "voda_real_removal.png")
    t0 = time.perf_counter()
    rs = load_scene(args.scene, args.model, args.iteration, size["train_every"], size["test_every"])
    print(f"scene: {rs.ts.model.num_gaussians:,} Gaussians, {len(rs.ts.train)} training / "
          f"{len(rs.ts.test)} held-out views at {rs.ts.width}×{rs.ts.height} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    partial = args.out / "results.partial.json"
    done = {r["scene"]["seed"]: r for r in json.loads(partial.read_text())["rows"]} \
        if partial.is_file() else {}
    sel_path = args.out / "selections_seed0.npz"
    figure_stale = False
    for seed in seeds:
        row = done.get(seed)
        missing = [m for m in methods if row is None or m not in row["methods"]]
        if not missing:
            continue
        print(f"seed {seed}: {' '.join(missing)}", flush=True)
        new, sel = run_seed(rs, seed, p, missing)
        new = json.loads(json.dumps(new, default=float))  # as a resumed row reads
        if row is not None:  # the seed's shared fields are the same in both runs
            row["methods"].update(new["methods"])
            new = row
        done[seed] = new
        if seed == seeds[0]:
            save_selections(sel_path, {**load_selections(sel_path), **sel})
            figure_stale = True
        atomic.write_text(partial, json.dumps({"rows": list(done.values())}, default=float))
    rows = [done[s] for s in seeds]
    prior = json.loads((args.out / "results.json").read_text()) \
        if (args.out / "results.json").is_file() else {}
    figure, cut = prior.get("figure"), prior.get("true_part")  # they stand unless seed 0 ran
    if figure_stale or figure is None or not fig_path.is_file():
        figure = removal_figure(rs, load_selections(sel_path), args.scene, fig_path)
    if figure_stale or cut is None:
        print("seed 0's selections cut to the true sets", flush=True)
        cut = true_part(rs, load_selections(sel_path))
    runs = [*prior.get("runs", []), {"seconds": time.perf_counter() - t0, "env": env_block()}]
    res = {"command": "python -m studies.voda.real_removal" + (" --quick" if args.quick else ""),
           "scene": SCENE, "iteration": args.iteration, "gaussians": rs.ts.model.num_gaussians,
           "objects": rs.names, "seeds": seeds, "methods": methods, "protocol": p,
           "voda_config": asdict(VodaConfig(**p["voda"])),
           "views": {"images": IMAGES, "train": len(rs.ts.train), "test": len(rs.ts.test),
                     "train_every": size["train_every"], "test_every": size["test_every"],
                     "width": rs.ts.width, "height": rs.ts.height},
           "figure": figure, "true_part": cut, "env": runs[-1]["env"], "runs": runs,
           "seconds": sum(r["seconds"] for r in runs), "rows": rows,
           "summary": summarise(rows, methods, rs.names)}
    atomic.write_text(args.out / "results.json", json.dumps(res, indent=1, default=float))
    if json_path is not None:
        atomic.write_text(json_path, json.dumps(res, indent=1, default=float))
    (args.out / "results.md").write_text(markdown(res))
    print(markdown(res))
    print(f"total {res['seconds']:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
