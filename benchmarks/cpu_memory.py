"""Peak resident memory of one CPU forward + backward (the target: 1M Gaussians at
1920×1080 ≤ 2 GB), measured in a fresh subprocess so the peak is the case's own.

    python benchmarks/cpu_memory.py [--n 1000000] [--width 1920] [--height 1080] [--D 0] [--threads T]

The scene is the benchmark scene (benchmarks/common.py random_box_scene, SH degree 3) on a width × height
camera with f = 500·width/512. Every scene tensor is a leaf requiring grad. Reports (MB): the
process's resident set before the render (torch + scene), the absolute peak (VmHWM, what the
target counts) and the peak of each phase above its start (the forward under autograd; the
backward, incl. the gradients it allocates), the tensors autograd saved for the backward (each
storage once), the tile–Gaussian pairs, and the run's wall time. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]


def measure(n: int, width: int, height: int, D: int) -> dict:
    """The case in this process: call it in a fresh one (memory_case)."""
    sys.path.insert(0, str(ROOT))
    import gsrender  # noqa: F401, I001 (before torch, as the `gsrender` command: its defaults apply)
    import torch

    from benchmarks.common import PeakMemory, _status_kb, random_box_scene, render_scene

    sc = random_box_scene(n, width, height=height)
    leaves = {k: sc[k].requires_grad_(True) for k in ("means", "quats", "scales", "opacities", "sh")}
    feats = torch.rand(n, D, generator=torch.Generator().manual_seed(D)).requires_grad_(True) if D else None
    saved: dict[int, int] = {}

    def pack(t):  # each saved storage counted once
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    row = {"n_gaussians": n, "width": width, "height": height, "D": D, "threads": torch.get_num_threads(),
           "rss_before_mb": _status_kb("VmRSS") / 1024}
    t0 = time.perf_counter()
    with PeakMemory() as fwd:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = render_scene(leaves, feats, sc["viewmat"], sc["K"], width, height, "sorted", "auto", False)
        loss = out.colors.sum() + out.alphas.sum() + out.depths.sum() + (out.features.sum() if D else 0)
    row["pairs"] = int(out.meta["n_intersections"])
    del out
    with PeakMemory() as bwd:
        loss.backward()
    row.update(wall_s=time.perf_counter() - t0, fwd_peak_above_start_mb=fwd.delta_mb,
               bwd_peak_above_start_mb=bwd.delta_mb, saved_for_backward_mb=sum(saved.values()) / 2**20,
               peak_rss_mb=max(fwd.peak_mb, bwd.peak_mb), peak_method=fwd.method)
    return row


def memory_case(n: int, width: int, height: int, D: int = 0, threads: int | None = None) -> dict:
    """measure() in a fresh subprocess (its peak is this case's alone)."""
    cmd = [sys.executable, str(HERE), "--worker", "--n", str(n), "--width", str(width), "--height", str(height),
           "--D", str(D)] + (["--threads", str(threads)] if threads else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        return {"n_gaussians": n, "width": width, "height": height, "D": D,
                "skipped": f"subprocess failed (exit {proc.returncode}): {proc.stderr[-300:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1080)
    p.add_argument("--D", type=int, default=0, help="feature channels besides RGB + depth")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        if a.threads:
            import torch

            torch.set_num_threads(a.threads)
        print(json.dumps(measure(a.n, a.width, a.height, a.D)))
        return 0
    row = memory_case(a.n, a.width, a.height, a.D, a.threads)
    print(json.dumps(row))
    return 0 if "skipped" not in row else 1


if __name__ == "__main__":
    raise SystemExit(main())
