"""docs/distributed.md's check: `torchrun --nproc_per_node=2 -m gsrender train --distributed`
against the two single-process runs it compares with, per seed: (b) the same views in the same
steps (`--batch-views 2`) and (a) one view a step (`gsrender train` of the same `--steps`).
One thread a process (OMP_NUM_THREADS=1); the three runs of a seed one after another. Writes
distributed_check.json: per run kind and seed the trainer's results.json figures and the wall
time, and the final Gaussians' largest position / opacity difference between (b) and the 2-rank
run.

    python benchmarks/distributed_check.py [--colmap ../shared/data/snowmiku_small] [--seeds 0,1,2,3,4]
        [--steps 200] [--out out/distributed_check]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import gsrender from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import ROOT, SNOWMIKU_SMALL, env_block, torchrun

KINDS = {  # run kind: the command's prefix before the training arguments
    "two_ranks": lambda py: [torchrun(), "--standalone", "--nproc_per_node=2",
                             "-m", "gsrender", "train", "--distributed"],
    "batch2": lambda py: [py, "-m", "gsrender", "train", "--batch-views", "2"],
    "one": lambda py: [py, "-m", "gsrender", "train"],
}


def train(kind: str, seed: int, args, folder: Path) -> dict:
    cmd = [*KINDS[kind](sys.executable), "--colmap", args.colmap, "--steps", str(args.steps),
           "--seed", str(seed), "--no-progress", "--out", str(folder)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"distributed_check: {kind} seed {seed} failed:\n{proc.stderr[-3000:]}")
    rep = json.loads((folder / "results.json").read_text())
    return {"steps": rep["steps"], "views_per_step": rep["views_per_step"], "wall_s": wall,
            "test_psnr": rep["test"]["psnr"], "test_ssim": rep["test"]["ssim"],
            "train_psnr": rep["train"]["psnr"], "gaussians": rep["gaussians_final"]}


def _ply(folder: Path) -> Path:
    """The final model of a `gsrender train` run in folder (its results.json names it)."""
    return Path(json.loads((folder / "results.json").read_text())["ply"])


def ply_difference(a: Path, b: Path) -> dict:
    """The largest per-Gaussian position and opacity difference of two PLYs of one row order."""
    from gsrender.io import load_ply

    pa, pb = load_ply(a), load_ply(b)
    if pa.means.shape != pb.means.shape:
        return {"same_count": False}
    return {"same_count": True, "max_position": float((pa.means - pb.means).abs().max()),
            "max_opacity": float((pa.opacities - pb.opacities).abs().max())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--colmap", default=str(SNOWMIKU_SMALL))
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--out", default="out/distributed_check")
    args = p.parse_args(argv)
    out = Path(args.out)
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = {k: [] for k in KINDS}
    ply = []
    for seed in seeds:
        for kind in KINDS:
            runs[kind].append({"seed": seed, **train(kind, seed, args, out / f"{kind}_{seed}")})
            print(f"seed {seed} {kind}: held-out {runs[kind][-1]['test_psnr']:.3f} dB", flush=True)
        ply.append({"seed": seed, **ply_difference(_ply(out / f"two_ranks_{seed}"),
                                                    _ply(out / f"batch2_{seed}"))})
    res = {"env": env_block("cpu"), "scene": args.colmap, "steps": args.steps, "seeds": seeds,
           "threads_per_process": 1, "runs": runs, "ply_two_ranks_vs_batch2": ply}
    (out / "distributed_check.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
