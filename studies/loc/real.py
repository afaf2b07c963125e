"""SplitGS-Loc on a real trained 3DGS: the Mip-NeRF 360 bonsai (studies/loc/REPORT.md).

The model is the one `make bench-real` trains from the committed SfM model
(data/scenes/bonsai/sfm_model; out/bench_real/model/bonsai, `--preset 3dgs`), pinned to one
iteration (--iteration, default 7000) so that a longer run in the same folder does not change
the study. Maps are built from the training photos only (the undistorted 798×531 PINHOLE images
of the prepared scene, out/bench_real/bonsai) with their SfM poses; queries are the held-out
photos (every 8th of all 292 sorted by name, gsrender.io.mipnerf360.held_out), localized from
their intrinsics alone and scored against their poses from the same joint SfM.

Every method, ablation and baseline of the synthetic study (studies/loc/trained.py METHODS:
SplitGS-Loc, its one-factor ablations, the earlier method, the ladder's rungs, rendered-depth
back-projection and a triangulated map), with its frozen defaults and the same RootSIFT features
(2,000 keypoints a training photo, 1,500 a query) and matcher. Nothing is chosen on the queries.

Scale: the SfM frame has none, so translation thresholds are fractions of the camera-orbit
radius (the mean in-plane distance of the training cameras from their centroid, in the plane of
best fit): the synthetic study's 1 / 2 / 5 cm of its 2.8 m rig radius, i.e. 0.36 / 0.71 / 1.79 %
of the radius, with its 1 / 2 / 5°. Median errors are given in SfM units and in % of the radius,
with 95 % bootstrap intervals over the queries.

    python studies/loc/real.py [--scene out/bench_real/bonsai] [--model out/bench_real/model/bonsai]
        [--iteration 7000] [--map-every 8] [--methods splitgs plain ...]
        [--json benchmarks/results/loc_real.json] [--figure docs/images/loc_real.png]

--map-every k builds the maps from every k-th training photo (by name): the default 8 (32 of the
255) was fixed from the time of one view before any query was localized (every lifting pass
renders each map view; all methods need seven passes over a model of up to 2.5 M Gaussians).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gsrender.loc import diagnostics as D
from gsrender.loc import metrics as LM
from gsrender.loc import pipeline as P
from gsrender.loc import query as QR
from gsrender.loc.features import SiftExtractor
from studies import scenes as TR
from studies.loc import trained as LT

SCENE = "bonsai"
ITERATION = 7000
MAP_EVERY = 8
TRAIN_FEATURES = LT.SIZES[LT.DEFAULT_SIZE]["train_features"]
QUERY_FEATURES = LT.SIZES[LT.DEFAULT_SIZE]["query_features"]
# the synthetic study's thresholds as fractions of its rig radius
SYNTHETIC_RADIUS = TR.SIZES[LT.DEFAULT_SIZE].radius
THRESHOLDS = {key: (tm / SYNTHETIC_RADIUS, rd) for key, (tm, rd) in LT.RECALL_LIMITS.items()}
RECALL_KEYS = tuple(THRESHOLDS)
BOOTSTRAP = 2000
# the query cameras drawn in the figure: SplitGS-Loc, the plain lifted map and the external
# baselines
FIGURE_METHODS = ("splitgs", "plain", "depth_backproj", "triangulated")


def centres(viewmats) -> np.ndarray:
    vm = np.asarray(viewmats, np.float64)
    return -np.einsum("cji,cj->ci", vm[:, :3, :3], vm[:, :3, 3])


def orbit_frame(viewmats) -> tuple[float, np.ndarray, np.ndarray]:
    """(radius, centroid [3], basis [3,3]) of the training cameras' orbit: the plane of best fit
    (rows 0, 1 of basis span it, row 2 is its normal) and the mean distance of the centres from
    their centroid within it."""
    c = centres(viewmats)
    mid = c.mean(0)
    _, _, vt = np.linalg.svd(c - mid)
    inplane = (c - mid) @ vt[:2].T
    return float(np.linalg.norm(inplane, axis=1).mean()), mid, vt


def load_scene(scene: Path, model_root: Path, iteration: int):
    """(model, training cameras, held-out cameras) of the prepared scene and the model at
    exactly `iteration`."""
    from gsrender.io.mipnerf360 import load_mipnerf360_scene
    from gsrender.io.ply import load_ply

    ply = model_root / "point_cloud" / f"iteration_{iteration}" / "point_cloud.ply"
    if not ply.is_file() or not (scene / "sparse" / "0").is_dir():
        raise SystemExit(f"no trained model at {ply} (or no prepared scene at {scene}): `make "
                         f"bench-real` prepares the scene and trains it from the committed SfM "
                         f"model (data/scenes/{SCENE}/sfm_model)")
    train = load_mipnerf360_scene(scene, "images", split="train")["cameras"]
    test = load_mipnerf360_scene(scene, "images", split="test")["cameras"]
    return load_ply(ply), train, test


def read_image(cam) -> np.ndarray:
    import imageio.v3 as iio

    return np.asarray(iio.imread(cam.image_path))[..., :3]


def extract(cams, n_features: int, tick) -> tuple[list, list[float]]:
    """Each camera's photo -> RootSIFT (keypoints, descriptors), and the seconds of each."""
    sift = SiftExtractor(n_features)
    feats, secs = [], []
    for c in cams:
        img = read_image(c)
        t0 = time.perf_counter()
        feats.append(sift(img))
        secs.append(time.perf_counter() - t0)
        tick()
    return feats, secs


def localize_all(m, feats: list, cams, ratio, tick) -> dict:
    """Every query against map m: lists of t_err (scene units), r_err (deg) — inf for a
    failure —, ms (matching + PnP), inliers, matches, axial (signed displacement along the
    optical axis, scene units, nan for a failure) and the estimated camera centre (None)."""
    r = {k: [] for k in ("t_err", "r_err", "ms", "inliers", "matches", "axial", "centre")}
    for f, c in zip(feats, cams):
        K = c.K.double().numpy()
        res = QR.localize(np.zeros((c.height, c.width, 3), np.uint8), K, m.points,
                          m.descriptors, lambda _im, f=f: f, ratio=ratio)
        vm = c.viewmat.double().numpy()
        if res.success:
            te, re = LM.pose_errors(vm[:3, :3], vm[:3, 3], res.R, res.t)
            ax = D.axial_displacement(vm, res.R, res.t)
            centre = (-np.asarray(res.R).T @ np.asarray(res.t)).tolist()
        else:
            te = re = math.inf
            ax, centre = math.nan, None
        r["t_err"].append(te), r["r_err"].append(re), r["axial"].append(ax)
        r["centre"].append(centre)
        r["ms"].append(res.timings_ms["matching"] + res.timings_ms["pnp"])
        r["inliers"].append(int(res.inliers.sum())), r["matches"].append(int(res.matches.shape[0]))
        tick()
    return r


def hits(r: dict, radius: float, key: str) -> np.ndarray:
    frac, deg = THRESHOLDS[key]
    return (np.asarray(r["t_err"]) <= frac * radius) & (np.asarray(r["r_err"]) <= deg)


def query_stats(rows: dict, radius: float, seed: int = 0) -> dict:
    """Per method: recalls, success and the medians (t in units and in % of the radius, r in
    degrees), each [value, lo, hi] with a 95 % bootstrap interval over the queries, and the
    paired recall differences to splitgs on the same resamples."""
    n = len(next(iter(rows.values()))["t_err"])
    idx = np.random.default_rng(seed).integers(0, n, (BOOTSTRAP, n))
    ci = lambda v, f: [float(f(v)), *map(float, np.percentile([f(v[i]) for i in idx], [2.5, 97.5]))]
    out = {}
    for name, r in rows.items():
        t, rot = np.asarray(r["t_err"]), np.asarray(r["r_err"])
        o = {k: ci(hits(r, radius, k).astype(float), np.mean) for k in RECALL_KEYS}
        o["success"] = ci(np.isfinite(t).astype(float), np.mean)
        o["median_t_units"] = ci(t, np.median)
        o["median_t_pct_radius"] = [100 * x / radius for x in o["median_t_units"]]
        o["median_r_deg"] = ci(rot, np.median)
        if "splitgs" in rows:
            for k in RECALL_KEYS:
                d = hits(r, radius, k).astype(float) - hits(rows["splitgs"], radius, k)
                o[f"delta_{k}"] = ci(d, np.mean)
        out[name] = o
    return out


def run(model, train, test, methods=LT.METHODS, map_every: int = MAP_EVERY,
        train_features: int = TRAIN_FEATURES, query_features: int = QUERY_FEATURES,
        progress: bool = True) -> dict:
    """The study on one model: maps from every map_every-th training camera, every query
    localized against every method's map. -> the results (without command and machine)."""
    from tqdm import tqdm

    map_cams = train[::map_every]
    W, H = [c.width for c in map_cams], [c.height for c in map_cams]
    vm = torch.stack([c.viewmat for c in map_cams])
    Ks = torch.stack([c.K for c in map_cams])
    radius, mid, basis = orbit_frame(torch.stack([c.viewmat for c in train]))
    pipeline = {LT.RATIO_ABLATIONS.get(n, n) for n in methods} & set(LT.PIPELINE_METHODS)
    passes = len({tuple(getattr(P.preset(n), f) for f in P._PASS_FIELDS) for n in pipeline})
    passes += sum(n in methods for n in LT.EXTERNAL_METHODS)
    bar = tqdm(total=len(map_cams) + len(test) + passes * len(map_cams) + len(methods) * len(test),
               unit="step", ascii=True, mininterval=5, file=sys.stdout, dynamic_ncols=True,
               disable=not progress)
    tick = lambda: bar.update(1)
    bar.set_description("SIFT")
    t0 = time.perf_counter()
    train_feats, _ = extract(map_cams, train_features, tick)
    sift_s = time.perf_counter() - t0
    query_feats, query_sift_s = extract(test, query_features, tick)

    class Ticking(list):  # each lifting pass reads every map view's features once
        def __getitem__(self, i):
            tick()
            return list.__getitem__(self, i)

    bar.set_description(f"maps ({passes} passes over {len(map_cams)} views)")
    t1 = time.perf_counter()
    maps = LT.build_methods(model, vm, Ks, W if len(set(W)) > 1 else W[0],
                            H if len(set(H)) > 1 else H[0], Ticking(train_feats), methods)
    maps_s = time.perf_counter() - t1
    rows, per_method = {}, {}
    for name in methods:
        m, info = maps[name]
        bar.set_description(f"queries: {name}")
        r = localize_all(m, query_feats, test, None if name in LT.NO_RATIO else QR.DEFAULT_RATIO,
                         tick)
        rows[name] = r
        M, Dd = m.points.shape[0], m.descriptors.shape[1] if m.points.shape[0] else 128
        per_method[name] = {**{k: v for k, v in info.items()}, "map_points": int(M),
                            "map_mb": M * (3 + Dd) * 4 / 1e6,
                            "query_ms_median": float(np.median(r["ms"])),
                            "inliers_median": float(np.median(r["inliers"])),
                            "axial_median_units": float(np.nanmedian(r["axial"]))
                            if np.isfinite(r["axial"]).any() else math.nan, **r}
    bar.close()
    stats = query_stats(rows, radius)
    for name in methods:
        per_method[name].update(stats[name])
    tc = centres(torch.stack([c.viewmat for c in train]))
    return {"scene": SCENE, "train_photos": len(train), "map_views": len(map_cams),
            "map_every": map_every, "train_names": [c.name for c in train],
            "map_view_names": [c.name for c in map_cams],
            "queries": len(test), "query_names": [c.name for c in test],
            "image_size": [test[0].width, test[0].height], "gaussians": model.num_gaussians,
            "train_features": train_features, "query_features": query_features,
            "orbit_radius_units": radius, "orbit_centroid": mid.tolist(),
            "orbit_basis": basis.tolist(),
            "thresholds": {k: {"frac_radius": f, "units": f * radius, "deg": d}
                           for k, (f, d) in THRESHOLDS.items()},
            "synthetic_radius_m": SYNTHETIC_RADIUS,
            "train_centres": tc.tolist(),
            "query_centres": centres(torch.stack([c.viewmat for c in test])).tolist(),
            "train_sift_s": sift_s, "query_sift_ms_median": 1e3 * float(np.median(query_sift_s)),
            "maps_s": maps_s, "methods": list(methods), "results": per_method}


def _ci(v, scale=1.0, nd=1) -> str:
    if not math.isfinite(v[0]):
        return "∞"
    hi = "∞" if not math.isfinite(v[2]) else f"{scale * v[2]:.{nd}f}"
    return f"{scale * v[0]:.{nd}f} [{scale * v[1]:.{nd}f}, {hi}]"


def markdown(res: dict) -> str:
    """The study's tables (the caller adds command and machine)."""
    R, th = res["results"], res["thresholds"]
    lab = {k: f"R@{100 * t['frac_radius']:.2f}%r,{t['deg']:g}°" for k, t in th.items()}
    keys = sorted(th, key=lambda k: th[k]["deg"], reverse=True)
    lines = [f"{res['gaussians']:,} Gaussians; maps from {res['map_views']} of the "
             f"{res['train_photos']} training photos (every {res['map_every']}th); "
             f"{res['queries']} held-out query photos at {res['image_size'][0]}×"
             f"{res['image_size'][1]}; {res['train_features']:,} / {res['query_features']:,} "
             f"RootSIFT keypoints a training / query photo. Orbit radius "
             f"{res['orbit_radius_units']:.3f} SfM units; thresholds "
             + ", ".join(f"{100 * th[k]['frac_radius']:.2f} % of it ({th[k]['units']:.4f} units) "
                         f"and {th[k]['deg']:g}°" for k in keys)
             + " (the synthetic study's 5 / 2 / 1 cm of its 2.8 m rig radius). "
             "Values: over the queries (a failed query counts as infinite error), "
             "[95 % bootstrap interval over the queries].", ""]
    cols = ("method", "map points", "map MB", "build s", "match+PnP ms", *(lab[k] + " %" for k in keys),
            "localized %", "median t units", "median t % radius", "median r °", "inliers",
            f"Δ{lab[keys[1]]} vs splitgs")
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name in res["methods"]:
        r = R[name]
        lines.append("| " + " | ".join([
            name, f"{r['map_points']:,}", f"{r['map_mb']:.1f}", f"{r['build_s']:.0f}",
            f"{r['query_ms_median']:.0f}", *(_ci(r[k], 100, 0) for k in keys),
            _ci(r["success"], 100, 0), _ci(r["median_t_units"], 1, 3),
            _ci(r["median_t_pct_radius"], 1, 2), _ci(r["median_r_deg"], 1, 2),
            f"{r['inliers_median']:.0f}",
            "–" if name == "splitgs" else _ci(r[f"delta_{keys[1]}"], 100, 0)]) + " |")
    pipe = [n for n in res["methods"] if "n_gaussians" in R[n]]
    if pipe:
        lines += ["", "| method | Gaussians after split | selected | keypoints lifted % | "
                  "associations / map point | median axial displacement, % radius |",
                  "|---|---|---|---|---|---|"]
        for n in pipe:
            r = R[n]
            ax = r["axial_median_units"]
            lines.append(f"| {n} | {r['n_gaussians']:,} | {r['n_selected']:,} | "
                         f"{100 * r['lifted_share']:.0f} | {r['assoc_per_point']:.2f} | "
                         + ("–" if not math.isfinite(ax) else
                            f"{100 * ax / res['orbit_radius_units']:+.2f}") + " |")
    lines += ["", f"Time: SIFT {res['train_sift_s']:.0f} s for the map photos, "
              f"{res['query_sift_ms_median']:.0f} ms a query photo (median); all maps "
              f"{res['maps_s'] / 60:.1f} min (build s above: a method's own split, lifting and "
              "filtering; methods that share a split and lifting pass show the same pass)."]
    return "\n".join(lines) + "\n"


def plot(res: dict, path: Path, methods=FIGURE_METHODS) -> None:
    """Top view (the orbit's plane) of the training cameras, the map's, and the query cameras'
    true and estimated centres, one panel a method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = [m for m in methods if m in res["results"]]
    mid, basis = np.asarray(res["orbit_centroid"]), np.asarray(res["orbit_basis"])[:2]
    top = lambda p: (np.asarray(p, np.float64) - mid) @ basis.T
    tr, q = top(res["train_centres"]), top(res["query_centres"])
    names = set(res["map_view_names"])
    fig, axs = plt.subplots(1, len(methods), figsize=(4.2 * len(methods), 4.8), squeeze=False)
    key = sorted(res["thresholds"], key=lambda k: res["thresholds"][k]["deg"])[1]
    for ax, name in zip(axs[0], methods):
        r = res["results"][name]
        ax.scatter(*tr.T, s=3, c="0.8", label="training cameras")
        is_map = np.array([n in names for n in res.get("train_names", [])], bool)
        if is_map.any():
            ax.scatter(*tr[is_map].T, s=6, c="0.5", label="map views")
        ax.scatter(*q.T, s=22, facecolors="none", edgecolors="tab:blue", label="query, true")
        est = [c for c in r["centre"] if c is not None]
        if est:
            e = top(est)
            qq = q[[i for i, c in enumerate(r["centre"]) if c is not None]]
            for a, b in zip(qq, e):
                ax.plot([a[0], b[0]], [a[1], b[1]], c="tab:red", lw=0.8)
            ax.scatter(*e.T, s=10, c="tab:red", marker="x", label="query, estimated")
        fails = sum(c is None for c in r["centre"])
        ax.set_title(f"{name}: R@{res['thresholds'][key]['frac_radius'] * 100:.2f}%r,"
                     f"{res['thresholds'][key]['deg']:g}° {100 * r[key][0]:.0f} %, "
                     f"{fails} failed", fontsize=9)
        ax.set_aspect("equal"), ax.grid(alpha=0.3)
        ax.set_xlabel("SfM units (orbit plane)")
    axs[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"{res['scene']}: held-out query cameras, true vs estimated (top view; orbit "
                 f"radius {res['orbit_radius_units']:.2f} units)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110), plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scene", type=Path, default=ROOT / "out" / "bench_real" / SCENE,
                    help="the prepared scene (sparse/0, images/, prepare.json)")
    ap.add_argument("--model", type=Path, default=ROOT / "out" / "bench_real" / "model" / SCENE,
                    help="the training run's folder (point_cloud/iteration_N/point_cloud.ply)")
    ap.add_argument("--iteration", type=int, default=ITERATION,
                    help=f"the model's iteration (default {ITERATION}; pinned, never the latest)")
    ap.add_argument("--map-every", type=int, default=MAP_EVERY,
                    help=f"maps from every k-th training photo (default {MAP_EVERY})")
    ap.add_argument("--methods", nargs="+", choices=LT.METHODS, metavar="METHOD",
                    help=f"only these (splitgs always): {' '.join(LT.METHODS)}")
    ap.add_argument("--train-features", type=int, default=TRAIN_FEATURES)
    ap.add_argument("--query-features", type=int, default=QUERY_FEATURES)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "loc_real.json")
    ap.add_argument("--figure", type=Path, default=ROOT / "docs" / "images" / "loc_real.png")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    from gsrender.bench.measure import env_block
    from gsrender.io.atomic import write_json

    if args.map_every < 1:
        raise SystemExit(f"--map-every must be >= 1, got {args.map_every}")
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    methods = tuple(n for n in LT.METHODS if n == "splitgs" or n in (args.methods or LT.METHODS))
    t0 = time.perf_counter()
    model, train, test = load_scene(args.scene, args.model, args.iteration)
    res = run(model, train, test, methods, args.map_every, args.train_features,
              args.query_features, progress=not args.no_progress)
    res.update(iteration=args.iteration,
               command=" ".join(["python studies/loc/real.py",
                                 *(sys.argv[1:] if argv is None else argv)]),
               env=env_block(), wall_s=time.perf_counter() - t0)
    write_json(args.json, res, indent=1)
    plot(res, args.figure)
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
