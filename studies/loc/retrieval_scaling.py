"""Query matching time vs map size: brute-force mutual-NN over the whole map against
retrieval-limited matching (top-k training views by VLAD, then mutual-NN over their points),
side by side on one synthetic map per size. Each view observes `per_view` points; points carry
random unit 128-d descriptors clustered per view (so VLAD can tell views apart); the query holds
noisy copies of points seen by views 0-2. Times are medians over `reps` queries; compare ratios,
not absolute numbers, on a shared machine.

    python studies/loc/retrieval_scaling.py [--sizes 10000 100000 1000000] [--json out.json]
        [--plot docs/images/loc_retrieval_scaling.png]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gsrender.io import atomic
from gsrender.loc import retrieval as RT
from gsrender.loc.query import mutual_nn


def synthetic_map(M: int, per_view: int, D: int = 128, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    C = max(M // per_view, 1)
    view_of = torch.arange(M) % C
    centres = torch.nn.functional.normalize(torch.randn(C, D, generator=g), dim=1)
    desc = torch.nn.functional.normalize(centres[view_of] + 1.5 * torch.randn(M, D, generator=g) /
                                         D ** 0.5 * 4, dim=1)
    pv = RT.pack_views(torch.arange(M), view_of, M, C)
    feats = [(None, desc[view_of == c][:500].numpy()) for c in range(C)]
    cb, vd = RT.view_index(feats)
    return desc, pv, cb, vd, view_of, C


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--per-view", type=int, default=2500)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--query-features", type=int, default=1500)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path, help="PNG of matching time vs map size")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    rows = []
    for M in args.sizes:
        desc, pv, cb, vd, view_of, C = synthetic_map(M, args.per_view)
        g = torch.Generator().manual_seed(1)
        src = torch.nonzero(view_of < 3).squeeze(1)
        src = src[torch.randint(0, src.numel(), (args.query_features,), generator=g)]
        q = torch.nn.functional.normalize(desc[src] + 0.02 * torch.randn(len(src), desc.shape[1],
                                                                           generator=g), dim=1)
        t_full, t_rt, rec_full, rec_rt = [], [], 0.0, 0.0
        for _ in range(args.reps):
            t0 = time.perf_counter()
            mf = mutual_nn(q, desc)
            t1 = time.perf_counter()
            views = RT.top_views(q, vd, cb, args.top_k)
            sub = RT.points_in_views(pv, views.numpy(), C)
            mr = mutual_nn(q, desc[sub])
            mr[:, 1] = sub[mr[:, 1]]
            t2 = time.perf_counter()
            t_full.append((t1 - t0) * 1e3), t_rt.append((t2 - t1) * 1e3)
            rec_full = float((mf[:, 1] == src[mf[:, 0]]).float().sum()) / len(src)
            rec_rt = float((mr[:, 1] == src[mr[:, 0]]).float().sum()) / len(src)
        r = {"map_points": M, "views": C, "full_ms": float(np.median(t_full)),
             "retrieval_ms": float(np.median(t_rt)), "points_searched": int(sub.numel()),
             "correct_matches_full": rec_full, "correct_matches_retrieval": rec_rt}
        r["speedup"] = r["full_ms"] / r["retrieval_ms"]
        rows.append(r)
        print(f"M={M:>8} views={C:>4}: full {r['full_ms']:.0f} ms, top-{args.top_k} views "
              f"{r['retrieval_ms']:.0f} ms ({r['points_searched']} pts; {r['speedup']:.1f}×); "
              f"correct matches {rec_full:.2f} vs {rec_rt:.2f}", flush=True)
        del desc, pv
        if args.json:  # after every size, so an interrupted run keeps the sizes it finished
            atomic.write_text(args.json, json.dumps(rows, indent=1))
    if args.plot:
        plot(rows, args.top_k, args.per_view, args.plot)
    return 0


def plot(rows: list[dict], top_k: int, per_view: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = [r["map_points"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    ax.loglog(m, [r["full_ms"] for r in rows], "o-", label="whole map (brute-force mutual NN)")
    ax.loglog(m, [r["retrieval_ms"] for r in rows], "s-",
              label=f"top-{top_k} views by VLAD ({top_k * per_view} points searched)")
    ax.set_xlabel("map points"), ax.set_ylabel("query matching time (ms, median)")
    ax.grid(alpha=0.3, which="both"), ax.legend(fontsize=8)
    ax.set_title("1500 query descriptors, 2 threads, shared machine", fontsize=9)
    fig.tight_layout(), fig.savefig(path, dpi=110), plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
