"""SplitGS-Loc benchmark (issue #5): a seeded synthetic room whose map is degraded like a
photometric 3DGS; SplitGS-Loc against the ablations B0 (no split, all Gaussians, plain weighted
lifting), B1 (split, no selection) and B2 (selection, no split). Training views on two camera
loops and held-out queries are rendered from the ground-truth room (queries with an exposure
change and noise). Reports map size, build time, per-query time by stage, inlier ratio, the 3D
error of the inlier map points, median errors and recalls; plus the snowmiku real-image check.

    python benchmarks/loc_synthetic.py --quick [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gsrender
from gsrender.loc import metrics as LM
from gsrender.loc import pipeline as P
from gsrender.loc import room as RM
from gsrender.loc.features import SiftExtractor
from gsrender.loc.query import localize

METHODS = ("splitgs", "B0", "B1", "B2")
JSON_KEYS = ("median_t_cm", "median_r_deg", "recall_1cm1deg", "recall_2cm2deg", "recall_5cm5deg",
             "map_points", "build_s", "query_ms")
DATA = ROOT.parent / "shared" / "data"


def render_views(model, viewmats, Ks, W, H, bg=0.5):
    """RGB [C,H,W,3] in [0,1] and expected depth [C,H,W] (depth/alpha), one view at a time."""
    rgbs, depths = [], []
    for c in range(viewmats.shape[0]):
        out = gsrender.rasterize(model.means, model.quats, model.scales, model.opacities, model.sh,
                                 viewmats[c:c + 1], Ks[c:c + 1], W, H, sh_degree=0,
                                 backgrounds=torch.full((3,), bg))
        rgbs.append(out.colors[0].clamp(0, 1))
        depths.append((out.depths / out.alphas.clamp_min(1e-6))[0, ..., 0])
    return torch.stack(rgbs), torch.stack(depths)


def photometric_change(img: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Exposure gain, gamma and sensor noise of a held-out query."""
    gain = 0.75 + 0.5 * float(torch.rand(1, generator=gen))
    gamma = 0.85 + 0.3 * float(torch.rand(1, generator=gen))
    noise = 0.015 * torch.randn(img.shape, generator=gen)
    return ((img * gain).clamp(0, 1) ** gamma + noise).clamp(0, 1)


def backproject(kp, depth, K, viewmat):
    """World points of pixel positions kp [Q,2] (gsrender convention) at the rendered depth."""
    H, W = depth.shape
    x = np.clip(np.floor(kp[:, 0]).astype(int), 0, W - 1)
    y = np.clip(np.floor(kp[:, 1]).astype(int), 0, H - 1)
    z = depth[y, x]
    pc = np.stack([(kp[:, 0] - K[0, 2]) / K[0, 0] * z, (kp[:, 1] - K[1, 2]) / K[1, 1] * z, z], 1)
    R, t = viewmat[:3, :3], viewmat[:3, 3]
    return (pc - t) @ R  # Rᵀ(pc − t)


def run_seed(args, seed: int) -> dict:
    """One seeded room, its degraded map, training views and queries; every method's map and
    per-query results -> {method: raw lists and map facts}."""
    torch.manual_seed(seed)
    W, H = 640, 480
    t0 = time.perf_counter()
    room = RM.make_room(args.n_gaussians, seed=seed)
    smap = RM.degrade(room, merge_share=args.merge_share, seed=seed + 1)
    tv1, tK = RM.loop_cameras(args.views_per_loop, radius=0.5, height=1.1, width=W, height_px=H)
    tv2, _ = RM.loop_cameras(args.views_per_loop, radius=0.7, height=1.5,
                             yaw_offset_deg=180.0 / args.views_per_loop, width=W, height_px=H)
    train_vm, train_K = torch.cat([tv1, tv2]), torch.cat([tK, tK])
    gen = torch.Generator().manual_seed(7 + seed)
    qv, qK = RM.loop_cameras(args.queries, radius=0.6, height=1.3, yaw_offset_deg=7.0, width=W,
                             height_px=H)
    query_vm = RM.perturb_cameras(qv, gen, trans=0.1, rot_deg=5.0)
    train_rgb, _ = render_views(room, train_vm, train_K, W, H)
    query_rgb, query_depth = render_views(room, query_vm, qK, W, H)
    query_rgb = torch.stack([photometric_change(im, gen) for im in query_rgb])
    t_render = time.perf_counter() - t0
    print(f"seed {seed}: room {room.num_gaussians} Gaussians, degraded map {smap.num_gaussians}; "
          f"rendered {train_vm.shape[0]} training views and {qv.shape[0]} queries in "
          f"{t_render:.1f}s", flush=True)

    sift = SiftExtractor(n_features=args.n_features)
    t1 = time.perf_counter()
    train_feats = [SiftExtractor(n_features=args.train_features)(im) for im in train_rgb]
    t_feat = time.perf_counter() - t1
    # every method lifts the same training features: the extractor is handed view indices
    cached = train_feats.__getitem__
    view_ids = list(range(len(train_feats)))

    raw = {}
    for name in METHODS:
        tb = time.perf_counter()
        m, info = P.build_map(smap, train_vm, train_K, view_ids, W, H, cached, P.preset(name))
        build_s = time.perf_counter() - tb + t_feat  # SIFT on the training views is part of it
        r = {"t_err": [], "r_err": [], "times": [], "inlier_ratio": [], "err3d": [],
             "map_points": info["map_points"], "build_s": build_s,
             "n_gaussians": info["n_gaussians"], "n_selected": info["n_selected"]}
        for q in range(qv.shape[0]):
            res = localize(query_rgb[q], qK[q].numpy(), m.points, m.descriptors, sift)
            r["times"].append(res.timings_ms)
            vm = query_vm[q].double().numpy()
            te, re = (LM.pose_errors(vm[:3, :3], vm[:3, 3], res.R, res.t) if res.success
                      else (math.inf, math.inf))
            r["t_err"].append(te), r["r_err"].append(re)
            nm = len(res.matches)
            r["inlier_ratio"].append(float(res.inliers.sum()) / nm if nm else 0.0)
            if res.inliers.any():
                mm = res.matches[res.inliers]
                kps = res.keypoints[mm[:, 0]]
                gt = backproject(kps, query_depth[q].numpy(), qK[q].numpy(), vm)
                r["err3d"].append(float(np.median(np.linalg.norm(gt - m.points[mm[:, 1]].numpy(),
                                                                 axis=1))))
        raw[name] = r
        s = LM.summarize(r["t_err"], r["r_err"])
        print(f"  {name}: {info['map_points']} map points, build {build_s:.1f}s, median t "
              f"{s['median_t_cm']:.2f} cm, R@2cm2° {100 * s['recall_2cm2deg']:.0f}%", flush=True)
    return raw


def pool(runs: list[dict]) -> dict:
    """Every method's metrics over the queries of all seeds together (medians and recalls over
    the pooled queries; map points and build time are per-seed means)."""
    results = {}
    for name in METHODS:
        rs = [run[name] for run in runs]

        def cat(key, rs=rs):
            return [x for r in rs for x in r[key]]

        times = cat("times")
        stage = {k: float(np.median([t[k] for t in times])) for k in times[0]}
        err3d = cat("err3d")
        results[name] = {
            **LM.summarize(cat("t_err"), cat("r_err")),
            "map_points": round(float(np.mean([r["map_points"] for r in rs]))),
            "build_s": float(np.mean([r["build_s"] for r in rs])),
            "query_ms": stage["total"], "stages_ms": stage,
            "inlier_ratio": float(np.median(cat("inlier_ratio"))),
            "matched_3d_err_cm": float(np.median(err3d) * 100) if err3d else math.inf,
            "n_gaussians": round(float(np.mean([r["n_gaussians"] for r in rs]))),
            "n_selected": round(float(np.mean([r["n_selected"] for r in rs]))),
            "queries": len(times)}
    return results


def fmt_table(results: dict) -> str:
    cols = ("method", "map pts", "gaussians", "build s", "query ms (feat/match/pnp)", "inlier %",
            "3D err cm", "med t cm", "med r °", "R@1cm1°", "R@2cm2°", "R@5cm5°")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, r in results.items():
        st = r["stages_ms"]
        lines.append(
            f"| {name} | {r['map_points']} | {r['n_gaussians']} | {r['build_s']:.1f} | "
            f"{r['query_ms']:.0f} ({st['features']:.0f}/{st['matching']:.0f}/{st['pnp']:.0f}) | "
            f"{100 * r['inlier_ratio']:.0f} | {r['matched_3d_err_cm']:.2f} | {r['median_t_cm']:.2f} | "
            f"{r['median_r_deg']:.2f} | {100 * r['recall_1cm1deg']:.0f} | "
            f"{100 * r['recall_2cm2deg']:.0f} | {100 * r['recall_5cm5deg']:.0f} |")
    return "\n".join(lines)


def targets(results: dict) -> list[str]:
    s, b0 = results["splitgs"], results["B0"]
    checks = [
        ("median t ≤ 0.7× B0", s["median_t_cm"] <= 0.7 * b0["median_t_cm"]),
        ("recall@2cm2° ≥ B0 + 10 pts", s["recall_2cm2deg"] >= b0["recall_2cm2deg"] + 0.10),
        ("map points ≤ 0.5× B0", s["map_points"] <= 0.5 * b0["map_points"]),
        ("recall@5cm5° ≥ 95%", s["recall_5cm5deg"] >= 0.95),
        ("query ≤ 250 ms", s["query_ms"] <= 250),
    ]
    return [f"{'MET ' if ok else 'MISS'} {name}" for name, ok in checks]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the ≤ 10 min configuration")
    ap.add_argument("--json", type=Path, help="write {method: metrics} here")
    ap.add_argument("--no-real", action="store_true", help="skip the snowmiku real-image check")
    ap.add_argument("--seeds", type=int, help="rooms (seeds 0..n-1) pooled (quick 2, full 4)")
    ap.add_argument("--merge-share", type=float, default=RM.DEFAULT_MERGE_SHARE,
                    help="share of the surface merged at each cell size: the map's degradation")
    args = ap.parse_args(argv)
    args.n_gaussians = 150_000 if args.quick else 300_000
    args.views_per_loop = 12 if args.quick else 24
    args.queries = 20 if args.quick else 40
    args.n_features, args.train_features = 2000, 3000
    torch.set_num_threads(min(torch.get_num_threads(), 2) if args.quick else torch.get_num_threads())
    n_seeds = args.seeds or (2 if args.quick else 4)
    results = pool([run_seed(args, seed) for seed in range(n_seeds)])
    print(f"pooled over {n_seeds} rooms, {results['B0']['queries']} queries "
          f"(merge share {args.merge_share}):")
    print(fmt_table(results))
    print("targets (SplitGS-Loc vs B0):\n  " + "\n  ".join(targets(results)))
    if args.json:
        out = {k: {key: results[k][key] for key in JSON_KEYS} for k in METHODS}
        args.json.write_text(json.dumps(out, indent=2))
    if not args.no_real:
        from loc_real import run_real  # benchmarks/loc_real.py

        run_real(DATA / "snowmiku_small")
    return 0


if __name__ == "__main__":
    sys.exit(main())
