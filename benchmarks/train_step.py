"""Where a CPU training step's time goes, and the loss / optimiser paths side by side.

    python benchmarks/train_step.py [--colmap ../shared/data/snowmiku_small] [--steps 10]

Trains `--warmup` steps of `gsrender train`'s defaults, then times `--steps` more by phase
(render, loss, backward, densification statistics, Adam) and, in the same run on the step's own
images and parameters, the SSIM loss by the fused CPU kernel against the same formula in
F.conv2d + tensor ops, and fused Adam against torch's default (foreach) Adam. Medians; the
ratios are the figures to quote on a shared machine. Then `--steps` whole steps (Trainer.train_step)
by process CPU time and wall time per step: at 1 thread the CPU time is the load-independent
cost. Writes train_step.json to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import gsrender from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# gsrender before torch: its OpenMP wait policy (docs/cpu.md) applies only so
import gsrender  # noqa: F401, I001
import torch

from benchmarks.common import SNOWMIKU_SMALL, env_block, median
from gsrender import metrics
from gsrender.train.run import _config, build_parser, load_dataset, make_trainer
from gsrender.io import atomic



def _timed_step(tr, views, phases: dict) -> None:
    """One train_step's work, phase by phase (the same calls as Trainer.train_step)."""
    def tick(name, t0):
        t = time.perf_counter()
        phases[name].append(t - t0)
        return t
    t = time.perf_counter()
    batch = tr._next_views(views)
    out = tr.render(batch, background=tr._background(train=True))
    t = tick("render", t)
    means2d = out.meta["means2d"]
    means2d.retain_grad()
    target = torch.stack([v.image for v in batch])
    loss = tr.loss(out.colors, target)
    t = tick("loss", t)
    tr.opt.zero_grad(set_to_none=True)
    loss.backward()
    t = tick("backward", t)
    tr.stats.update(means2d.grad, out.meta["radii"], batch[0].width, batch[0].height)
    t = tick("stats", t)
    tr.opt.step()
    tick("adam", t)
    tr.step_count += 1


def _median_ms(fn, runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * median(times)


def _ssim_tensor_ops(img, target):
    planar = (0, 3, 1, 2)
    g = metrics._window(img.dtype, img.device)
    return metrics._ssim_map_tensor_ops(img.permute(planar), target.permute(planar), g).mean()


def _adam_step_ms(params: dict, runs: int, **kw) -> float:
    copies = [p.detach().clone().requires_grad_(True) for p in params.values()]
    for c in copies:
        c.grad = torch.randn_like(c)
    opt = torch.optim.Adam(copies, lr=1e-3, **kw)
    return _median_ms(opt.step, runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--colmap", default=str(SNOWMIKU_SMALL), help="COLMAP scene (default snowmiku_small)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default torch's)")
    ap.add_argument("--out", default="out/train_step")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    targs = build_parser().parse_args(["--colmap", args.colmap])
    data = load_dataset(targs, torch.device("cpu"))
    tr = make_trainer(targs, data, _config(targs))
    for _ in range(args.warmup):
        tr.train_step(data.train)
    phases = defaultdict(list)
    for _ in range(args.steps):
        _timed_step(tr, data.train, phases)
    step_ms = {k: 1000 * median(v) for k, v in phases.items()}
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(args.steps):
        tr.train_step(data.train)
    whole = {"cpu_ms": 1000 * (time.process_time() - c0) / args.steps,
             "wall_ms": 1000 * (time.perf_counter() - t0) / args.steps}

    view = data.train[0]
    img = tr.render([view]).colors.detach().requires_grad_(True)  # [1, H, W, 3]
    target = view.image[None]
    side = {
        "ssim_kernel_fwd_bwd_ms": _median_ms(lambda: metrics.ssim(img, target).backward(), args.steps),
        "ssim_tensor_ops_fwd_bwd_ms": _median_ms(lambda: _ssim_tensor_ops(img, target).backward(), args.steps),
        "adam_fused_ms": _adam_step_ms(tr.params, args.steps, fused=True),
        "adam_foreach_ms": _adam_step_ms(tr.params, args.steps, foreach=True),
    }
    res = {"env": env_block("cpu"), "scene": args.colmap, "gaussians": tr.num_gaussians,
           "image": [view.width, view.height], "step_ms": step_ms,
           "step_total_ms": sum(step_ms.values()), "whole_step": whole, **side,
           "ssim_speedup": side["ssim_tensor_ops_fwd_bwd_ms"] / side["ssim_kernel_fwd_bwd_ms"],
           "adam_speedup": side["adam_foreach_ms"] / side["adam_fused_ms"]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "train_step.json", json.dumps(res, indent=1))
    print(f"{tr.num_gaussians} Gaussians, {view.width}x{view.height}, threads "
          f"{torch.get_num_threads()}, load {res['env'].get('loadavg')}")
    print("step (ms, medians): " + ", ".join(f"{k} {v:.1f}" for k, v in step_ms.items())
          + f"; total {res['step_total_ms']:.1f}")
    print(f"whole steps: CPU {whole['cpu_ms']:.1f} ms, wall {whole['wall_ms']:.1f} ms per step "
          f"(OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')})")
    print(f"SSIM fwd+bwd: kernel {side['ssim_kernel_fwd_bwd_ms']:.1f} ms vs tensor ops "
          f"{side['ssim_tensor_ops_fwd_bwd_ms']:.1f} ms ({res['ssim_speedup']:.2f}x); Adam: fused "
          f"{side['adam_fused_ms']:.1f} ms vs foreach {side['adam_foreach_ms']:.1f} ms "
          f"({res['adam_speedup']:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
