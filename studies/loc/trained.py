"""SplitGS-Loc on trained 3DGS models (studies/loc/REPORT.md): per scene, a 3DGS trained from the
images of a dense rig (studies.scenes), a localization map lifted from it with its
training images and poses, and held-out query photos rendered from the ground-truth scene (the
rig's held-out views, then seeded poses over the rig's shell) with an exposure change and noise.
SplitGS-Loc against its one-factor ablations (METHODS below), the earlier SplitGS-Loc
("legacy"), a ladder from back-projection to the full method, and two external maps from the
SAME training images, poses and SIFT features: the trained model's rendered-depth
back-projection and a triangulated (SfM-style, known poses) map. Per scene: R@5cm5°, R@2cm2°,
R@1cm1°, median errors, map size, build and query time, and the diagnostics (associations per
keypoint and per map point, inliers on a wrong split sibling, signed depth error of the inlier
map points, the camera's displacement along its optical axis); then mean and 95 % t-interval
over scenes, and paired differences to splitgs.

    python studies/loc/trained.py [--seeds 2000 ...] [--size small|full] [--quick]
                                     [--out DIR] [--scenes-root out/trained_scenes] [--queries N]

Every setting below is frozen before evaluation (studies/loc/REPORT.md names the commit);
EVAL_SEEDS were used for nothing else. TUNING_SEEDS: the scenes the child-opacity rule was
chosen on (`--seeds 0 1`). The split and scene size are the VODA study's (studies/voda/trained.py),
so both studies share one cache of trained scenes.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gsrender.bench.measure import env_block, mean_ci95
from gsrender.cameras import rig
from gsrender.io import atomic
from gsrender.loc import baselines as BL
from gsrender.loc import metrics as LM
from gsrender.loc import pipeline as P
from gsrender.loc import query as QR
from gsrender.loc import split as SP
from gsrender.loc.features import SiftExtractor
from gsrender.loc.queries import evaluate_queries, photometric_change, render_views
from studies import scenes as TR

TUNING_SEEDS = (0, 1)
# Scenes never evaluated before the defaults (one-to-one lifting, normal axis kept, the
# child-opacity rule, the ratio test) were frozen. 2000–2004 evaluated the earlier method
# (studies/loc/REPORT.md) and are not reused.
EVAL_SEEDS = (3000, 3001, 3002, 3003, 3004)
SCENE_SPLIT = "isolated"
# Each method: the map it localizes against (a pipeline preset or an external map) and whether
# its matcher applies Lowe's ratio test. Every map is matched with the ratio test except in the
# rows that ablate it ("no_ratio") or reproduce the earlier method ("legacy").
#   one-factor rows against splitgs: no_split; the child-opacity rules other than the default;
#     split_normal (split the thin axis too); all_contributors (lift a keypoint onto every top-4
#     contributor with w >= tau_a); no_ratio; no_select; no_consistency
#   legacy: the earlier SplitGS-Loc (all_contributors + split_normal + peak rule + no ratio test)
#   the ladder from back-projection to the full method, one step a rung: depth_backproj ->
#     plain (lift each keypoint onto one Gaussian) -> split_only (+ split) -> no_consistency
#     (+ selection) -> splitgs (+ consistency filter)
OPACITY_ROWS = tuple(f"{rule}_opacity" for rule in SP.OPACITY_RULES
                     if rule != SP.DEFAULT_OPACITY_RULE)
PIPELINE_METHODS = ("splitgs", "no_split", *OPACITY_ROWS, "split_normal", "all_contributors",
                    "no_select", "no_consistency", "split_only", "plain", "legacy")
EXTERNAL_METHODS = ("depth_backproj", "triangulated")
RATIO_ABLATIONS = {"no_ratio": "splitgs"}  # method -> the map it matches without the ratio test
NO_RATIO = {"legacy", *RATIO_ABLATIONS}
METHODS = PIPELINE_METHODS[:1] + tuple(RATIO_ABLATIONS) + PIPELINE_METHODS[1:] + EXTERNAL_METHODS
LADDER_STEPS = {"depth_backproj": "each keypoint at its rendered depth",
                "plain": "lifting: each keypoint onto one Gaussian, at its mean",
                "split_only": "the MoG split", "no_consistency": "multi-view selection",
                "splitgs": "the consistency filter"}
LADDER = tuple(LADDER_STEPS)
# Per trained-scene size (studies.scenes.SIZES): queries per scene and SIFT budgets.
# The study size is "full" (100 training views at 320×240, 2,000 training steps); "small" (100
# views at 128×96, 600 steps) is the same protocol at a size a loaded 2-core machine trains in
# a few minutes a scene; "quick" is the CI size (20 views at 96×72).
SIZES = {"small": {"queries": 60, "train_features": 2000, "query_features": 1500},
         "full": {"queries": 60, "train_features": 2000, "query_features": 1500},
         "quick": {"queries": 6, "train_features": 600, "query_features": 500}}
DEFAULT_SIZE = "full"
# Query poses beyond the held-out ring: on the rig's shell at 0.85–1.1× its radius, elevations
# within the training rings', looking at the rig's target moved by N(0, 0.3 m) (0.15 m in z).
QUERY_RADIUS = (0.85, 1.1)
QUERY_AIM_STD = (0.3, 0.3, 0.15)
# the recall keys of gsrender.loc.metrics.summarize and their (metres, degrees) limits
RECALL_LIMITS = {f"recall_{round(tm * 100)}cm{round(rd)}deg": (tm, rd)
                 for tm, rd in LM.RECALL_THRESHOLDS}
RECALL_KEYS = tuple(RECALL_LIMITS)
BOOTSTRAP = 2000  # resamples of the pooled queries (within each scene) for the pooled intervals
DELTA_KEYS = ("recall_2cm2deg", "recall_5cm5deg", "median_t_cm", "median_r_deg")
PIPELINE_ONLY = ("lifted_share", "assoc_per_keypoint", "assoc_per_point", "assoc_per_point_median")


def query_cameras(ts, n: int, seed: int):
    """(viewmats [n,4,4], Ks [n,3,3]): the scene's held-out views first, then seeded poses."""
    vm, K = ts.test.viewmats[:n], ts.test.Ks[:n]
    extra = n - vm.shape[0]
    if extra <= 0:
        return vm, K
    sz = TR.SIZES[ts.size]
    g = torch.Generator().manual_seed(10_007 + seed)
    u = lambda a, b: a + (b - a) * torch.rand(extra, generator=g, dtype=torch.float64)
    elev = torch.deg2rad(u(*TR.ELEVATIONS))
    az = u(0.0, 2 * math.pi)
    r = sz.radius * u(*QUERY_RADIUS)
    target = torch.tensor(TR.TARGET, dtype=torch.float64)
    eyes = target + r[:, None] * torch.stack([elev.cos() * az.cos(), elev.cos() * az.sin(),
                                              elev.sin()], 1)
    aims = target + torch.randn(extra, 3, generator=g, dtype=torch.float64) * \
        torch.tensor(QUERY_AIM_STD, dtype=torch.float64)
    qv, qK = rig(eyes, aims, ts.width, ts.height, 60.0)
    return torch.cat([vm, qv.to(vm.dtype)]), torch.cat([K, qK.to(K.dtype)])


def build_methods(model, viewmats, Ks, width, height, train_feats: list,
                  methods=METHODS) -> dict:
    """{method: (map, info)} from the training views' (keypoints, descriptors) train_feats, one
    per view, for every map of methods: info has build_s (excluding the shared training SIFT)
    and, for the pipeline methods, the split model's size, the selected count and the lifting's
    associations. width/height: ints or one per view."""
    views, feat = list(range(len(train_feats))), train_feats.__getitem__
    pipeline = {RATIO_ABLATIONS.get(n, n) for n in methods} & set(PIPELINE_METHODS)
    maps = P.build_maps(model, viewmats, Ks, views, width, height, feat,
                        {name: P.preset(name) for name in PIPELINE_METHODS if name in pipeline})
    out = {name: (m, {"build_s": info["timings_s"]["total"],
                      "n_gaussians": info["n_gaussians"], "n_selected": info["n_selected"],
                      **association_counts(info["associations"], m)})
           for name, (m, info) in maps.items()}
    for name, base in RATIO_ABLATIONS.items():
        if name in methods:
            out[name] = out[base]
    if "depth_backproj" in methods:
        t0 = time.perf_counter()
        m = BL.depth_backprojection_map(model, viewmats, Ks, views, width, height, feat)
        out["depth_backproj"] = (m, {"build_s": time.perf_counter() - t0})
    if "triangulated" in methods:
        t0 = time.perf_counter()
        m = BL.triangulated_map(viewmats, Ks, views, feat)
        out["triangulated"] = (m, {"build_s": time.perf_counter() - t0})
    return out


class Scene:
    """One trained scene: training SIFT (shared by every map), the queries (ground-truth renders,
    photometric change, cached SIFT and depth) and every method's map."""

    def __init__(self, ts, seed: int, sz: dict):
        self.ts, self.seed = ts, seed
        W, H = ts.width, ts.height
        t0 = time.perf_counter()
        sift = SiftExtractor(sz["train_features"])
        self.train_feats = [sift(im) for im in ts.train.rgb]
        self.sift_s = time.perf_counter() - t0
        self.query_vm, self.query_K = query_cameras(ts, sz["queries"], seed)
        rgb, self.query_depth = render_views(ts.gt, self.query_vm, self.query_K, W, H, bg=0.0)
        gen = torch.Generator().manual_seed(20_011 + seed)
        qsift = SiftExtractor(sz["query_features"])
        self.query_feats = [qsift(photometric_change(im, gen)) for im in rgb]
        centres = lambda v: -(v[:, :3, :3].transpose(1, 2) @ v[:, :3, 3:])[..., 0]
        self.query_dist = torch.cdist(centres(self.query_vm.double()),
                                      centres(ts.train.viewmats.double())).min(1).values.numpy()

    def build_all(self, methods=METHODS) -> dict:
        """build_methods on this scene's model, training views and training SIFT."""
        ts = self.ts
        return build_methods(ts.model, ts.train.viewmats, ts.train.Ks, ts.width, ts.height,
                             self.train_feats, methods)

    def evaluate(self, m, ratio, tick=lambda: None) -> dict:
        return evaluate_queries(m, self.query_feats, self.query_vm, self.query_K,
                                self.query_depth, tick, ratio=ratio)


def association_counts(counts: dict, m) -> dict:
    """The lifting's associations: share of training keypoints lifted, associations per lifted
    keypoint (1 under the one-to-one rule), and per map point (its n_obs), mean and median."""
    n_obs = m.n_obs.double()
    return {"lifted_share": counts["lifted_keypoints"] / max(counts["keypoints"], 1),
            "assoc_per_keypoint": counts["associations"] / max(counts["lifted_keypoints"], 1),
            "assoc_per_point": float(n_obs.mean()) if n_obs.numel() else math.nan,
            "assoc_per_point_median": float(n_obs.median()) if n_obs.numel() else math.nan}


def _nanmedian(x, scale: float = 1.0) -> float:
    a = np.asarray(x, np.float64)
    return float(np.nanmedian(a) * scale) if np.isfinite(a).any() else math.nan


def query_metrics(r: dict) -> dict:
    """One scene's recalls and medians over all its queries (failures count as infinite), and
    the diagnostics over their inliers: signed depth error of the map points (cm, + = behind the
    surface), the camera's signed displacement along its optical axis (cm, + = backwards), the
    share of inliers on a point with a split sibling in the map and, of those, the share with a
    sibling nearer the keypoint's true point."""
    out = LM.summarize(r["t_err"], r["r_err"])
    out["err3d_cm"] = _nanmedian(r["err3d"], 100)
    out["depth_err_cm"] = _nanmedian(r["depth_err"], 100)
    out["axial_cm"] = _nanmedian(r["axial"], 100)
    n_inl, n_sib = sum(r["inliers"]), sum(r["sibling"])
    out["sibling_share"] = n_sib / n_inl if n_inl else math.nan
    out["wrong_sibling_share"] = sum(r["wrong_sibling"]) / n_sib if n_sib else math.nan
    out["query_ms"] = float(np.median(r["ms"]))
    out["inliers"] = float(np.median(r["inliers"]))
    out["success"] = float(np.mean(np.isfinite(r["t_err"])))
    return out


def interval(vals) -> list[float]:
    """[mean, 95 % half-width] over scenes; [inf, nan] when a scene's value is infinite (a
    median over queries most of which failed), [nan, nan] when there is none."""
    x = [float(v) for v in vals if not math.isnan(float(v))]
    if not x:
        return [math.nan, math.nan]
    if not all(math.isfinite(v) for v in x):
        return [math.inf, math.nan]
    return list(mean_ci95(x))


def run_scene(size: str, seed: int, sz: dict, root: Path, bar, methods=METHODS) -> dict:
    """Loads (or trains and caches) the scene of seed, builds the methods' maps, localizes every
    query."""
    bar.set_description(f"scene {seed}: load/train")
    ts = TR.load_or_train(size, seed, SCENE_SPLIT, root=root)
    bar.set_description(f"scene {seed}: maps")
    scene = Scene(ts, seed, sz)
    maps = scene.build_all(methods)
    training = ts.report["training"]
    res = {"seed": seed, "psnr_train": training["psnr_train"], "psnr_test": training["psnr_test"],
           "gaussians": ts.model.num_gaussians, "train_views": len(ts.train),
           "queries": len(scene.query_feats), "held_out_queries": min(len(ts.test), sz["queries"]),
           "query_dist_m": float(scene.query_dist.mean()), "train_sift_s": scene.sift_s,
           "methods": {}}
    for name in methods:
        m, info = maps[name]
        bar.set_description(f"scene {seed}: {name}")
        r = scene.evaluate(m, None if name in NO_RATIO else QR.DEFAULT_RATIO,
                           lambda: bar.update(1))
        res["methods"][name] = {**query_metrics(r), **info, "map_points": int(m.points.shape[0]),
                                "t_err": r["t_err"], "r_err": r["r_err"]}
    return res


def pooled_recalls(scenes: list[dict], name: str, seed: int = 0) -> dict:
    """Recalls over every query of every scene, and their paired differences to splitgs, each
    [value, lo, hi] with a 95 % bootstrap interval (queries resampled within each scene, the
    same resample for both methods). Captures query noise, not the spread between scenes."""
    rng = np.random.default_rng(seed)
    hits, base = {k: [] for k in RECALL_KEYS}, {k: [] for k in RECALL_KEYS}
    for sc in scenes:
        for k, (tm, rd) in RECALL_LIMITS.items():
            for dst, m in ((hits, name), (base, "splitgs")):
                r = sc["methods"][m]
                dst[k].append((np.asarray(r["t_err"]) <= tm) & (np.asarray(r["r_err"]) <= rd))
    sizes = [len(sc["methods"][name]["t_err"]) for sc in scenes]
    idx = [np.concatenate([off + rng.integers(0, n, n) for off, n in
                           zip(np.cumsum([0, *sizes[:-1]]), sizes)]) for _ in range(BOOTSTRAP)]
    out = {}
    for k in RECALL_KEYS:
        h, b = np.concatenate(hits[k]).astype(float), np.concatenate(base[k]).astype(float)
        for key, v in ((k, h), (f"delta_{k}", h - b)):
            boot = np.array([v[i].mean() for i in idx])
            out[key] = [float(v.mean()), *map(float, np.percentile(boot, [2.5, 97.5]))]
    return out


def summarize(scenes: list[dict], methods=METHODS) -> dict:
    """{method: {metric: [mean, ci]}} over scenes, paired differences to splitgs, and pooled
    recalls over all queries with bootstrap intervals."""
    keys = ("median_t_cm", "median_r_deg", *RECALL_KEYS, "err3d_cm", "depth_err_cm", "axial_cm",
            "sibling_share", "wrong_sibling_share", "query_ms", "inliers", "success",
            "map_points", "build_s")
    out = {}
    for name in methods:
        rows = [s["methods"][name] for s in scenes]
        base = [s["methods"]["splitgs"] for s in scenes]
        o = {k: interval([r[k] for r in rows]) for k in keys}
        for k in ("n_gaussians", "n_selected", *PIPELINE_ONLY):
            if k in rows[0]:
                o[k] = interval([r[k] for r in rows])
        o["delta_vs_splitgs"] = {k: interval([r[k] - b[k] for r, b in zip(rows, base)])
                                 for k in DELTA_KEYS}
        pooled_t = [e for r in rows for e in r["t_err"]]
        pooled_r = [e for r in rows for e in r["r_err"]]
        o["pooled"] = LM.summarize(pooled_t, pooled_r)
        o["pooled_bootstrap"] = pooled_recalls(scenes, name)
        out[name] = o
    return out


def ladder(scenes: list[dict]) -> list[dict]:
    """Each rung of LADDER after the first: its paired per-scene difference to the rung below
    ([mean, 95 % half-width] over scenes) in R@2cm2° and the median translation error."""
    out = []
    for lower, upper in itertools.pairwise(LADDER):
        d = {k: interval([s["methods"][upper][k] - s["methods"][lower][k] for s in scenes])
             for k in ("recall_2cm2deg", "median_t_cm")}
        out.append({"method": upper, "below": lower, **d})
    return out


def fmt(v, pct=False, nd=2) -> str:
    m, h = v
    if math.isnan(m):
        return "–"
    if not math.isfinite(m):
        return "∞"
    s = 100 if pct else 1
    nd = 0 if pct else nd
    return f"{s * m:.{nd}f} ± {s * h:.{nd}f}" if math.isfinite(h) else f"{s * m:.{nd}f}"


def markdown(results: dict) -> str:
    s = results["summary"]
    scenes = results["scenes"]
    methods = results["methods"]  # a results file of an earlier method list renders as it ran
    env = results["env"]
    machine = (f"Machine: {env['cpu']}, {env['cpu_threads']} threads, load {env['loadavg']}; "
               f"commit {env['commit']}; wall {results['wall_s'] / 60:.1f} min.")
    header = ("| scene seed | train views | Gaussians | PSNR train / held-out dB | queries "
              "(held-out views) | mean distance to nearest training camera m |")
    lines = [f"# SplitGS-Loc on trained 3DGS models ({results['size']} size)", "",
             f"Command: `{results['command']}`  ", machine, "", header, "|---|---|---|---|---|---|"]
    for sc in scenes:
        lines.append(f"| {sc['seed']} | {sc['train_views']} | {sc['gaussians']} | "
                     f"{sc['psnr_train']:.2f} / {sc['psnr_test']:.2f} | {sc['queries']} "
                     f"({sc['held_out_queries']}) | {sc['query_dist_m']:.2f} |")
    lines += ["", (f"Mean ± 95 % t-interval over {len(scenes)} scenes (per scene: over its "
                   "queries; a failed query counts as infinite error)."), ""]
    cols = ("method", "map points", "build s", "match+PnP ms", "R@5cm5° %", "R@2cm2° %",
            "R@1cm1° %", "median t cm", "median r °", "inlier 3D err cm", "ΔR@5cm5° vs splitgs",
            "ΔR@2cm2° vs splitgs")
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name in methods:
        r = s[name]
        d = r["delta_vs_splitgs"]
        lines.append("| " + " | ".join([
            name, fmt(r["map_points"], nd=0), fmt(r["build_s"], nd=1), fmt(r["query_ms"], nd=0),
            fmt(r["recall_5cm5deg"], True), fmt(r["recall_2cm2deg"], True),
            fmt(r["recall_1cm1deg"], True), fmt(r["median_t_cm"]), fmt(r["median_r_deg"]),
            fmt(r["err3d_cm"]),
            "–" if name == "splitgs" else fmt(d["recall_5cm5deg"], True),
            "–" if name == "splitgs" else fmt(d["recall_2cm2deg"], True)]) + " |")
    lines += ["", ("Pooled over all queries of all scenes (95 % bootstrap interval, queries "
                   "resampled within each scene; query noise only):"), "",
              "| method | R@5cm5° % | R@2cm2° % | ΔR@5cm5° vs splitgs | ΔR@2cm2° vs splitgs |",
              "|---|---|---|---|---|"]
    for name in methods:
        pb = s[name]["pooled_bootstrap"]
        cell = lambda v: f"{100 * v[0]:.0f} [{100 * v[1]:.0f}, {100 * v[2]:.0f}]"
        lines.append(f"| {name} | {cell(pb['recall_5cm5deg'])} | {cell(pb['recall_2cm2deg'])} | "
                     f"{cell(pb['delta_recall_5cm5deg'])} | {cell(pb['delta_recall_2cm2deg'])} |")
    lines += ["", "Split model size and selection (pipeline maps):", "",
              "| method | Gaussians after split | selected |", "|---|---|---|"]
    for name in (n for n in methods if "n_gaussians" in s[n]):
        r = s[name]
        lines.append(f"| {name} | {fmt(r['n_gaussians'], nd=0)} | {fmt(r['n_selected'], nd=0)} |")
    if "ladder" not in results:
        return "\n".join(lines) + "\n"
    lines += ["", "Ladder from back-projection to the full method, one step a rung (paired "
              "per-scene difference to the rung below, mean ± 95 % t-interval):", "",
              "| rung | adds | R@2cm2° % | median t cm | ΔR@2cm2° vs rung below | Δ median t cm |",
              "|---|---|---|---|---|---|"]
    rungs = [{"method": LADDER[0]}, *results["ladder"]]
    for r in rungs:
        name = r["method"]
        below = ("–", "–") if "below" not in r else (fmt(r["recall_2cm2deg"], True),
                                                     fmt(r["median_t_cm"]))
        lines.append(f"| {name} | {LADDER_STEPS[name]} | {fmt(s[name]['recall_2cm2deg'], True)} | "
                     f"{fmt(s[name]['median_t_cm'])} | {below[0]} | {below[1]} |")
    lines += ["", ("Diagnostics over each scene's queries (mean ± 95 % t-interval over scenes): "
                   "the lifting's associations, and over the PnP inliers the share whose map "
                   "point has a sibling (a child of the same split Gaussian) in the map, of those "
                   "the share with a sibling nearer the keypoint's true 3-d point, the median "
                   "signed depth error of the map points (+ = behind the surface) and the "
                   "estimated camera's median signed displacement along its optical axis "
                   "(+ = backwards)."), "",
              "| method | keypoints lifted % | associations / lifted keypoint | associations / "
              "map point | inliers | on a split sibling % | nearer sibling exists % | depth "
              "error cm | axial displacement cm |", "|---|---|---|---|---|---|---|---|---|"]
    for name in methods:
        r = s[name]
        lifting = [fmt(r[k], k == "lifted_share") if k in r else "–"
                   for k in ("lifted_share", "assoc_per_keypoint", "assoc_per_point")]
        lines.append("| " + " | ".join([
            name, *lifting,
            fmt(r["inliers"], nd=0), fmt(r["sibling_share"], True),
            fmt(r["wrong_sibling_share"], True), fmt(r["depth_err_cm"]), fmt(r["axial_cm"])])
            + " |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = results["summary"]
    fig, axs = plt.subplots(1, 3, figsize=(14, 4.2))
    methods = results["methods"]
    x = np.arange(len(methods))
    for off, key, label in ((-0.2, "recall_5cm5deg", "5 cm, 5°"), (0.2, "recall_2cm2deg", "2 cm, 2°")):
        v = np.array([s[n][key] for n in methods], np.float64)
        axs[0].bar(x + off, 100 * v[:, 0], 0.4, yerr=100 * np.nan_to_num(v[:, 1]), capsize=3,
                   label=label)
    axs[0].set_ylabel("recall (%)"), axs[0].legend(fontsize=8)
    for ax, key, label in ((axs[1], "median_t_cm", "median translation error (cm)"),
                           (axs[2], "map_points", "map points")):
        v = np.array([s[n][key] for n in methods], np.float64)
        ax.bar(x, np.where(np.isfinite(v[:, 0]), v[:, 0], np.nan), 0.6,
               yerr=np.nan_to_num(v[:, 1]), capsize=3)
        ax.set_ylabel(label)
    for ax in axs:
        ax.set_xticks(x, methods, rotation=35, ha="right", fontsize=8), ax.grid(alpha=0.3, axis="y")
    fig.suptitle(f"mean ± 95 % CI over {len(results['scenes'])} trained scenes "
                 f"({results['size']} size)", fontsize=10)
    fig.tight_layout(), fig.savefig(path, dpi=110), plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", help=f"scene seeds (default {EVAL_SEEDS})")
    ap.add_argument("--size", choices=tuple(SIZES), default=DEFAULT_SIZE,
                    help=f"trained-scene size (default {DEFAULT_SIZE})")
    ap.add_argument("--quick", action="store_true",
                    help="CI: the quick size, 6 queries, the first tuning seed by default")
    ap.add_argument("--queries", type=int, help="queries per scene (default: the size's)")
    ap.add_argument("--scenes-root", type=Path, default=Path("out/trained_scenes"),
                    help="cache of the trained scenes (trained there when missing)")
    ap.add_argument("--out", type=Path, default=Path("out/loc_trained"),
                    help="writes loc_trained.json, loc_trained.md and loc_trained.png here")
    ap.add_argument("--methods", nargs="+", choices=METHODS, metavar="METHOD",
                    help="run only these methods (splitgs always; the ladder's table needs all "
                         f"its rungs): {' '.join(METHODS)}")
    ap.add_argument("--resume", type=Path, nargs="+",
                    help="earlier loc_trained.json files of the same size: their scenes are kept "
                         "and their seeds not rerun")
    args = ap.parse_args(argv)
    from tqdm import tqdm

    torch.set_num_threads(min(torch.get_num_threads(), 2))
    size = "quick" if args.quick else args.size
    sz = dict(SIZES[size])
    if args.queries is not None:
        if args.queries < 1:
            raise SystemExit(f"--queries must be >= 1, got {args.queries}")
        sz["queries"] = args.queries
    seeds = tuple(args.seeds) if args.seeds else (TUNING_SEEDS[:1] if args.quick else EVAL_SEEDS)
    methods = tuple(n for n in METHODS if n == "splitgs" or n in (args.methods or METHODS))
    args.out.mkdir(parents=True, exist_ok=True)
    scenes = []
    for path in args.resume or ():
        prev = json.loads(path.read_text())
        if prev["size"] != size:
            raise SystemExit(f"--resume: {path} is of size {prev['size']!r}, not {size!r}")
        have = {sc["seed"] for sc in scenes}
        scenes += [sc for sc in prev["scenes"] if sc["seed"] in seeds and sc["seed"] not in have]
    scenes.sort(key=lambda sc: seeds.index(sc["seed"]))
    pending = [sd for sd in seeds if sd not in {sc["seed"] for sc in scenes}]
    t0 = time.perf_counter()
    command = " ".join(["python studies/loc/trained.py", *(sys.argv[1:] if argv is None else argv)])

    def write() -> dict:
        res = {"size": size, "sizes": sz, "scene_size": TR.SIZES[size].__dict__,
               "split": SCENE_SPLIT, "seeds": [sc["seed"] for sc in scenes],
               "tuning_seeds": list(TUNING_SEEDS), "eval_seeds": list(EVAL_SEEDS),
               "methods": list(methods),
               "configs": {n: P.preset(n).__dict__ for n in PIPELINE_METHODS if n in methods},
               "match_ratio": {n: None if n in NO_RATIO else QR.DEFAULT_RATIO for n in methods},
               "command": command, "env": env_block(), "wall_s": time.perf_counter() - t0,
               "scenes": scenes, "summary": summarize(scenes, methods)}
        if set(LADDER) <= set(methods):
            res["ladder"] = ladder(scenes)
        atomic.write_text(args.out / "loc_trained.json", json.dumps(res, indent=1))
        (args.out / "loc_trained.md").write_text(markdown(res))
        return res

    bar = tqdm(total=len(pending) * len(methods) * sz["queries"], unit="query", ascii=True,
               mininterval=5, file=sys.stdout, dynamic_ncols=True)
    for seed in pending:
        scenes.append(run_scene(size, seed, sz, args.scenes_root, bar, methods))
        write()  # after every scene: an interrupted run keeps the scenes it finished
    bar.close()
    if not scenes:
        raise SystemExit("no scene evaluated (check --seeds and --resume)")
    results = write()
    plot(results, args.out / "loc_trained.png")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
