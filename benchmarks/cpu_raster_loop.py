"""The CPU raster ops alone, in a loop, for a profiler: renders the benchmark scene
(benchmarks/common.py random_box_scene, 100k Gaussians at 512², SH 3 + D features) once to capture
rasterize_fwd's inputs, then calls rasterize_fwd (fwd) or rasterize_bwd (bwd, upstream gradients
of ones) ITERS times and prints the median ms and the forward's stats (lanes listed / α-evaluated
/ contributing) and pairs.

    OMP_NUM_THREADS=1 perf record -e cpu-clock -F 4000 -g -- python benchmarks/cpu_raster_loop.py fwd 0 8
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gsrender.ops as ops  # noqa: E402
import gsrender.render as render_mod  # noqa: E402
from benchmarks.common import random_box_scene, render_scene  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("op", choices=("fwd", "bwd"))
    p.add_argument("D", type=int, nargs="?", default=0)
    p.add_argument("iters", type=int, nargs="?", default=8)
    p.add_argument("--n", type=int, default=100_000)
    a = p.parse_args(argv)
    sc = random_box_scene(a.n, 512)
    t = {k: sc[k] for k in ("means", "quats", "scales", "opacities", "sh")}
    feats = torch.rand(a.n, a.D, generator=torch.Generator().manual_seed(a.D)) if a.D else None
    captured = []
    raster = ops.rasterize
    render_mod.ops = type("CapturingOps", (), {"__getattr__": lambda _, k: getattr(ops, k),
                                               "rasterize": staticmethod(lambda *x, **k: captured.append((x, k))
                                                                         or raster(*x, **k))})()
    try:
        with torch.no_grad():
            render_scene(t, feats, sc["viewmat"], sc["K"], 512, 512, "sorted", "auto", False)
    finally:
        render_mod.ops = ops
    args, kw = captured[0]
    with torch.no_grad():
        render, alphas, last_ids, aux, stats, plan = raster(*args, **kw)
        ts = []
        for _ in range(a.iters):
            t0 = time.perf_counter()
            if a.op == "fwd":
                raster(*args, **kw)
            else:
                (means2d, conics, opac, colors, depths, bgs, offsets, ids, w, h, tile, mode, wp) = args[:13]
                torch.ops.gsrender.rasterize_bwd(means2d, conics, opac, colors, depths, bgs, offsets, ids, w, h, tile,
                                                 mode, list(wp), render, alphas, last_ids, aux,
                                                 torch.ones_like(render), torch.ones_like(alphas), plan)
            ts.append((time.perf_counter() - t0) * 1e3)
    print(f"{a.op} D={a.D} CH={args[3].shape[-1]} median {statistics.median(ts):.1f} ms  "
          f"stats (listed, alpha-evaluated, contributing lanes) {stats.sum(0).tolist()}  pairs {args[7].numel()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
