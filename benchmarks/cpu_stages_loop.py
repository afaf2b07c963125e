"""The per-Gaussian stages (project, sh, bin) alone, in a loop, for a profiler and for A/B
runs at 1M Gaussians: gsrender.rasterize(profile=True) on the benchmark scene
(benchmarks/common.py random_box_scene, SH degree 3) with the raster stage replaced by a stub that
returns empty images, so project, sh and bin run — and are timed — exactly as in the pipeline.
Prints one JSON line: the median ms of each stage over --iters runs after a warm-up, and the pairs.

    OMP_NUM_THREADS=1 perf record -e cpu-clock -F 4000 -o bin.data -- python benchmarks/cpu_stages_loop.py --n 1000000
    python benchmarks/cpu_ab.py --base /work/main --stages --n 1000000   # side by side
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gsrender.ops as ops  # noqa: E402
import gsrender.render as render_mod  # noqa: E402
from gsrender import _C as gsrender_C  # noqa: E402

STAGES = ("project", "sh", "bin")


def _stub_rasterize(means2d, conics, opacities, colors, *args, **kw):
    C, CH = colors.shape[0], colors.shape[-1]
    width, height = args[4], args[5]
    z = colors.new_zeros
    return (z(C, height, width, CH), z(C, height, width, 1), None, None,
            torch.zeros(C, 3, dtype=torch.int64), torch.zeros(2, dtype=torch.int64))  # stats, plan


def _clocks(meta: dict) -> dict:
    return {k: meta[k] for k in ("timings_ms", "n_intersections")}


def stages_case(n: int, size: int, iters: int, height: int | None = None) -> dict:
    """Median ms of project / sh / bin (the pipeline's own clocks) and the pairs, the benchmark
    scene at n Gaussians on a size × height camera (height: size)."""
    from benchmarks.common import random_box_scene, render_scene

    height = size if height is None else height
    sc = random_box_scene(n, size, height=height)
    t = {k: sc[k] for k in ("means", "quats", "scales", "opacities", "sh")}
    stub = type("StubRasterOps", (), {"__getattr__": lambda _, k: getattr(ops, k),
                                      "rasterize": staticmethod(_stub_rasterize)})()
    render_mod.ops = stub
    if os.environ.get("GSRENDER_HOST_CACHE") != "0":
        # the stub never reaches the CPU raster, whose second call installs the block cache
        # (csrc/cpu/host_blocks.h): without it every stage maps its outputs fresh, and on a VM a
        # fresh page costs more than the stage (1M: project 264 ms against 17)
        gsrender_C.install_host_allocator()
    try:
        with torch.no_grad():
            # only the clocks and the count are kept: holding every run's tensors (meta holds the
            # binning's) would map fresh pages per run
            metas = [_clocks(render_scene(t, None, sc["viewmat"], sc["K"], size, height, "sorted",
                                     "auto", True).meta) for _ in range(iters + 2)][2:]
    finally:
        render_mod.ops = ops
    row = {"n_gaussians": n, "width": size, "height": height,
           "pairs": int(metas[0]["n_intersections"])}
    row["stages_ms"] = {s: statistics.median(m["timings_ms"][s] for m in metas) for s in STAGES}
    row["per_gaussian_ms"] = statistics.median(sum(m["timings_ms"][s] for s in STAGES)
                                               for m in metas)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--size", type=int, default=512, help="image width (and height unless --height)")
    p.add_argument("--height", type=int, default=None)
    p.add_argument("--iters", type=int, default=5)
    a = p.parse_args(argv)
    print(json.dumps(stages_case(a.n, a.size, a.iters, a.height)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
