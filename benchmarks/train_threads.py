"""A CPU training step's process CPU time and wall time under OpenMP's two wait policies at 2
threads and at one thread (docs/training.md, "Thread use"): benchmarks/train_step.py's whole
steps in a fresh process per setting, the settings alternating for --rounds rounds so that each
sees the same load. Writes train_threads.json.

    python benchmarks/train_threads.py [--colmap ../shared/data/snowmiku_small] [--rounds 2] [--steps 15]
        [--out out/train_threads]
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

from benchmarks.common import ROOT, SNOWMIKU_SMALL, env_block

SETTINGS = {  # name: (OMP_WAIT_POLICY, torch threads)
    "2 threads, OMP_WAIT_POLICY=ACTIVE (spinning)": ("ACTIVE", 2),
    "2 threads, OMP_WAIT_POLICY=PASSIVE (the default)": ("PASSIVE", 2),
    "1 thread": ("PASSIVE", 1),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--colmap", default=str(SNOWMIKU_SMALL))
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--out", default="out/train_threads")
    args = p.parse_args(argv)
    out = Path(args.out)
    runs = {name: [] for name in SETTINGS}
    for rnd in range(args.rounds):
        for name, (policy, threads) in SETTINGS.items():
            folder = out / f"round{rnd}_{policy.lower()}_{threads}"
            cmd = [sys.executable, str(ROOT / "benchmarks" / "train_step.py"), "--colmap", args.colmap,
                   "--warmup", str(args.warmup), "--steps", str(args.steps), "--threads", str(threads),
                   "--out", str(folder)]
            subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                           env=dict(os.environ, OMP_WAIT_POLICY=policy))
            step = json.loads((folder / "train_step.json").read_text())
            runs[name].append({**step["whole_step"], "loadavg": step["env"]["loadavg"]})
            print(f"round {rnd}, {name}: {runs[name][-1]}", flush=True)
    res = {"env": env_block("cpu"), "scene": args.colmap, "warmup": args.warmup, "steps": args.steps,
           "rounds": args.rounds, "settings": runs}
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_threads.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
