"""Time per training step against the rank count for `gsrender train --distributed` on this
machine: runs benchmarks/distributed.py under torchrun with each rank count in turn, rounds
alternating (1, 2, 1, 2, ...) so that every count sees the same load, one thread a rank
(OMP_NUM_THREADS=1). Writes distributed.json (the rank-0 line of every run, in run order).

    python benchmarks/distributed_scaling.py [--colmap ../shared/data/snowmiku_small] [--ranks 1,2]
        [--rounds 2] [--scale 0.5] [--steps 3] [--warmup 1] [--out out/distributed]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import gsrender from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import ROOT, SNOWMIKU_SMALL, env_block, torchrun


def run_ranks(ranks: int, args) -> dict:
    """One torchrun of benchmarks/distributed.py with `ranks` processes: its rank-0 JSON line."""
    cmd = [torchrun(), "--standalone", f"--nproc_per_node={ranks}",
           str(ROOT / "benchmarks" / "distributed.py"), "--colmap", args.colmap, "--scale", str(args.scale),
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        raise SystemExit(f"distributed_scaling: {ranks} ranks failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--colmap", default=str(SNOWMIKU_SMALL))
    p.add_argument("--ranks", default="1,2", help="comma-separated rank counts")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--scale", type=float, default=0.5)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--out", default="out/distributed")
    args = p.parse_args(argv)
    counts = [int(r) for r in args.ranks.split(",")]
    runs = []
    for rnd in range(args.rounds):
        for ranks in counts:
            runs.append({"round": rnd, **run_ranks(ranks, args)})
            print(f"round {rnd}, {ranks} ranks: {runs[-1]['step_s_max']:.3f} s / step", flush=True)
    res = {"env": env_block("cpu"), "scene": args.colmap, "scale": args.scale, "steps": args.steps,
           "warmup": args.warmup, "threads_per_rank": 1, "runs": runs}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "distributed.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
