"""Feature-channel sweep: ms per frame vs D for the matrix kernel, the scalar kernel and a
gsplat-style channel-chunked rendering, forward and backward.

    python benchmarks/channels.py [--quick | --smoke] [--D 1,16,64] [--out DIR]

Chunked: the D feature channels rendered 32 at a time, one rasterize call per chunk (each call
re-projects, re-bins and renders RGB + depth again), as gsplat does for high D. Forward = the
rasterize call(s); backward = one backward of colors.sum() + features.sum() (the chunks'
features concatenated). One synthetic scene (preset "counter", scaled down), one camera.
Writes channels.json, channels.md and channels.png (ms vs D, log-log) to --out (default
out/channels).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gsrender
from benchmarks.common import Timer, env_block, median
from gsrender.io import atomic

CHUNK = 32
METHODS = ("matrix", "scalar", "chunked")
CONFIGS = {
    "full": {"D": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], "n": 50_000, "size": 256, "reps": 3,
             "warmup": 1},
    "quick": {"D": [1, 16, 64, 256], "n": 20_000, "size": 160, "reps": 2, "warmup": 1},
    "smoke": {"D": [1, 33], "n": 800, "size": 32, "reps": 1, "warmup": 0},
}


def make_inputs(n: int, size: int, device: torch.device) -> tuple[dict, torch.Tensor, torch.Tensor]:
    from gsrender.synthetic import PRESETS, make_preset

    spec = PRESETS["counter"]
    model, vms, ks, w0, h0 = make_preset("counter", scale=n / spec["n_gaussians"], sh_degree=3, n_views=1)
    K = ks[0].clone()
    K[0] *= size / w0
    K[1] *= size / h0
    t = {"means": model.means, "quats": model.quats, "scales": model.scales, "opacities": model.opacities,
         "sh": model.sh}
    return {k: v.float().to(device) for k, v in t.items()}, vms[:1].float().to(device), K[None].float().to(device)


def _render(t: dict, feats, vm, K, size: int, precision: str):
    return gsrender.rasterize(t["means"], t["quats"], t["scales"], t["opacities"], t["sh"], vm, K, size, size,
                              sh_degree=3, features=feats, precision=precision)


def forward(method: str, t: dict, feats, vm, K, size: int):
    """(colors, features [1,H,W,D]) by one method."""
    if method != "chunked":
        out = _render(t, feats, vm, K, size, "fp32" if method == "scalar" else "auto")
        return out.colors, out.features
    colors, parts = None, []
    for c0 in range(0, feats.shape[1], CHUNK):
        out = _render(t, feats[:, c0:c0 + CHUNK], vm, K, size, "auto")
        colors = out.colors if colors is None else colors
        parts.append(out.features)
    return colors, torch.cat(parts, dim=-1)


def time_method(method: str, t: dict, D: int, vm, K, size: int, cfg: dict, device: torch.device) -> dict:
    feats0 = torch.rand(t["means"].shape[0], D, generator=torch.Generator().manual_seed(D)).to(device)
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in t.items()}
    feats = feats0.clone().requires_grad_(True)
    fwd, bwd = [], []
    for i in range(cfg["warmup"] + cfg["reps"]):
        for v in (*leaves.values(), feats):
            v.grad = None
        with Timer(device) as tf:
            colors, f = forward(method, leaves, feats, vm, K, size)
        loss = colors.sum() + f.sum()
        with Timer(device) as tb:
            loss.backward()
        if i >= cfg["warmup"]:
            fwd.append(tf.ms)
            bwd.append(tb.ms)
    return {"method": method, "D": D, "fwd_ms": median(fwd), "bwd_ms": median(bwd),
            "calls": -(-D // CHUNK) if method == "chunked" else 1}


def markdown(result: dict) -> str:
    env = result["env"]
    lines = [(f"# Feature channels ({result['config']}): {result['n_gaussians']} Gaussians, "
             f"{result['width']}x{result['height']}"), "",
             (f"{env['device']}, {env['cpu_threads']} threads, torch {env['torch']}, commit {env['commit'][:12]}, "
             f"load average {env['loadavg']}; chunked = {CHUNK} channels per rasterize call"), "",
             "| D | " + " | ".join(f"{m} fwd ms | {m} bwd ms" for m in METHODS) + " |",
             "|---|" + "---|---|" * len(METHODS)]
    by = {(r["method"], r["D"]): r for r in result["runs"]}
    for D in result["D"]:
        cells = []
        for m in METHODS:
            r = by.get((m, D))
            cells += [f"{r['fwd_ms']:.2f}", f"{r['bwd_ms']:.2f}"] if r else ["-", "-"]
        lines.append(f"| {D} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for m, color in zip(METHODS, ("C0", "C1", "C2")):
        rs = sorted((r for r in result["runs"] if r["method"] == m), key=lambda r: r["D"])
        if not rs:
            continue
        ax.plot([r["D"] for r in rs], [r["fwd_ms"] for r in rs], "o-", color=color, label=f"{m} forward")
        ax.plot([r["D"] for r in rs], [r["bwd_ms"] for r in rs], "s--", color=color, label=f"{m} backward")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("feature channels D")
    ax.set_ylabel("ms / frame (median)")
    ax.set_title(f"{result['n_gaussians']} Gaussians, {result['width']}x{result['height']}, {result['env']['device']}")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ints(s: str) -> list[int]:
    try:
        vals = [int(v) for v in s.split(",") if v.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers, got {s!r}") from e
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected channel counts >= 1, got {s!r}")
    return vals


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    speed = p.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true", help="D in 1,16,64,256, small scene (<= 2 minutes)")
    speed.add_argument("--smoke", action="store_true", help="tiny scene, 1 rep (seconds; for the tests)")
    p.add_argument("--D", type=_ints, default=None, help="comma list of channel counts")
    p.add_argument("--methods", default=",".join(METHODS), help=f"comma list of {','.join(METHODS)}")
    p.add_argument("--backend", choices=("cpu", "cuda"), default=None)
    p.add_argument("--out", default="out/channels", help="output folder (default out/channels)")
    args = p.parse_args(argv)
    config = "smoke" if args.smoke else "quick" if args.quick else "full"
    cfg = CONFIGS[config]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods or any(m not in METHODS for m in methods):
        p.error(f"--methods: expected a comma list of {','.join(METHODS)}, got {args.methods!r}")
    device = torch.device(args.backend or ("cuda" if torch.cuda.is_available() else "cpu"))
    Ds = args.D or cfg["D"]
    t0 = time.perf_counter()
    t, vm, K = make_inputs(cfg["n"], cfg["size"], device)
    runs = []
    for D in Ds:
        for m in methods:
            r = time_method(m, t, D, vm, K, cfg["size"], cfg, device)
            runs.append(r)
            print(f"D={D:5d} {m:8s} fwd {r['fwd_ms']:9.2f} ms  bwd {r['bwd_ms']:9.2f} ms", file=sys.stderr,
                  flush=True)
    result = {"config": config, "n_gaussians": t["means"].shape[0], "width": cfg["size"], "height": cfg["size"],
              "chunk": CHUNK, "D": Ds, "methods": methods, "runs": runs, "env": env_block(device),
              "total_s": time.perf_counter() - t0}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "channels.json", json.dumps(result, indent=1))
    md = markdown(result)
    (out / "channels.md").write_text(md)
    plot(result, out / "channels.png")
    print(md)
    print(f"wrote channels.json, channels.md, channels.png to {out} ({result['total_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
