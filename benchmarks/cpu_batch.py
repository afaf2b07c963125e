"""Batched cameras: one rasterize call with C cameras vs C calls of one camera (the benchmark scene,
the same cameras), forward (no grad) and forward + backward; alternating, medians over rounds.

    python benchmarks/cpu_batch.py [N C ROUNDS]   (default 100000 2 2)
"""
import statistics
import sys
import time
from pathlib import Path

import torch

root = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, root)
import gsrender  # noqa: E402
from benchmarks.common import random_box_scene  # noqa: E402

n, C, rounds = (int(v) for v in (sys.argv[1:4] if len(sys.argv) > 3 else (100_000, 2, 2)))
sc = random_box_scene(n, 512)
t = {k: sc[k] for k in ("means", "quats", "scales", "opacities", "sh")}
vm = sc["viewmat"].repeat(C, 1, 1)
vm[:, 0, 3] = torch.linspace(-0.05, 0.05, C)
K = sc["K"].repeat(C, 1, 1)


def call(v, k, grad):
    leaves = {k_: x.clone().requires_grad_(grad) for k_, x in t.items()}
    with torch.set_grad_enabled(grad):
        out = gsrender.rasterize(leaves["means"], leaves["quats"], leaves["scales"], leaves["opacities"],
                                 leaves["sh"], v, k, 512, 512, sh_degree=3)
        if grad:
            (out.colors.sum() + out.alphas.sum()).backward()


def batched(grad):
    call(vm, K, grad)


def split(grad):
    for c in range(C):
        call(vm[c:c + 1], K[c:c + 1], grad)


for grad in (False, True):
    res = {"batched": [], "split": []}
    batched(grad)
    split(grad)
    for r in range(rounds):
        for name, f in (("batched", batched), ("split", split)) if r % 2 == 0 else (("split", split), ("batched", batched)):
            t0 = time.perf_counter()
            f(grad)
            res[name].append((time.perf_counter() - t0) * 1e3)
    b, s = statistics.median(res["batched"]), statistics.median(res["split"])
    print(f"{'fwd+bwd' if grad else 'fwd'} C={C} N={n}: batched {b:.0f} ms, {C} single calls {s:.0f} ms, split/batched {s / b:.2f}")
