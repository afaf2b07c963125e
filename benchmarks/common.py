"""Helpers shared by the benchmarks: the machine's sgemm GFLOP/s, the CPU benchmarks' scene, the
training benchmarks' scene and torchrun. Timing, memory, the environment block and the statistics
are gsrender.bench.measure's (re-exported here)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from gsrender.bench.measure import (  # noqa: F401
    CudaPeak,
    PeakMemory,
    Timer,
    _loadavg,
    _status_kb,
    env_block,
    environment,
    git_commit,
    mean_ci95,
    median,
    mem_available_mb,
    p90,
    peak_memory,
    render_scene,
)
from gsrender.io.paths import data_dir

ROOT = Path(__file__).resolve().parents[1]
SNOWMIKU_SMALL = data_dir() / "snowmiku_small"  # the training benchmarks' scene


def torchrun() -> str:
    """This interpreter's torchrun (the venv's), else the one on PATH."""
    exe = Path(sys.executable).with_name("torchrun")
    return str(exe) if exe.exists() else "torchrun"

# sgemm reference


def _best_time(fn, runs: int, min_time: float = 0.05) -> float:
    """Fastest seconds per call over `runs` repetitions of enough calls to last min_time: the
    machine's capability (the best of several, as other processes may share the cores)."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    reps = max(1, int(min_time / one))
    samples = []
    for _ in range(max(runs, 3)):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - t0) / reps)
    return min(samples)


def sgemm_gflops(chs: list[int], square: int, k: int = 32, tiles: int = 256) -> dict:
    """GFLOP/s of torch.mm on a large square problem, and of the rasterizer's shape: `tiles`
    blocks of [256 pixels, k Gaussians] × [k, CH] (torch.bmm, so all cores share the work as
    the rasterizer's parallel_for over tiles does)."""
    g = torch.Generator().manual_seed(0)
    a = torch.rand(square, square, generator=g)
    b = torch.rand(square, square, generator=g)
    t = _best_time(lambda: torch.mm(a, b), 5)
    out = {"square_n": square, "square": 2 * square**3 / t / 1e9, "tile_k": k, "tile": {}}
    for ch in chs:
        w = torch.rand(tiles, 256, k, generator=g)
        f = torch.rand(tiles, k, ch, generator=g)
        t = _best_time(lambda w=w, f=f: torch.bmm(w, f), 5)
        out["tile"][str(ch)] = 2 * tiles * 256 * k * ch / t / 1e9
    return out


# ---------------------------------------------------------------------------------------------
# the CPU benchmarks' scene


def random_box_scene(n: int, size: int, seed: int = 0, height: int | None = None) -> dict:
    """The CPU targets' scene: N Gaussians uniform in a box 5 ± 0.5 units in front of a size² pinhole camera (f = size·500/512,
    the box fills the view), log-normal scales (median e^-4, σ 0.6), sigmoid-normal opacities.
    height: a size × height camera instead (same f and draws; the box fills its view)."""
    g = torch.Generator().manual_seed(seed)
    f = 500.0 * size / 512
    height = size if height is None else height
    z = 5.0 + (torch.rand(n, generator=g) - 0.5)
    half_x, half_y = 0.5 * size / f * z, 0.5 * height / f * z  # the view's half extents at that depth
    means = torch.stack([(torch.rand(n, generator=g) * 2 - 1) * half_x,
                         (torch.rand(n, generator=g) * 2 - 1) * half_y, z], -1)
    return {"means": means, "quats": torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=-1),
            "scales": torch.exp(-4.0 + 0.6 * torch.randn(n, 3, generator=g)),
            "opacities": torch.sigmoid(torch.randn(n, generator=g)),
            "sh": 0.3 * torch.randn(n, 16, 3, generator=g),
            "viewmat": torch.eye(4)[None], "K": torch.tensor([[[f, 0.0, size / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]]])}
