"""Every output of the benchmark scene (benchmarks/common.py random_box_scene, SH degree 3, 512²,
sorted) saved to one file, and two such files compared bit for bit: the check behind a "same
outputs" claim for a CPU change. The forward at --n-fwd Gaussians (images, radii, means2d, depths,
conics, opacities, tile lists, stats) and forward + backward at --n-grad with 8 features (the
images and every input's gradient).

    PYTHONPATH=<checkout> GSRENDER_CPU_ISA=avx2 python benchmarks/cpu_outputs.py dump base.pt   # per build, per ISA
    python benchmarks/cpu_outputs.py compare base.pt new.pt     # exit status 1 when some differ
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

META = ("radii", "means2d", "depths", "conics", "opacities", "tile_offsets", "flatten_ids", "stats")
PARAMS = ("means", "quats", "scales", "opacities", "sh")


def outputs(n: int, grad: bool, size: int = 512) -> dict:
    """name → tensor for one render of the benchmark scene at n Gaussians (with gradients: grad)."""
    import gsrender
    from benchmarks.common import random_box_scene

    sc = random_box_scene(n, size)
    t = {k: sc[k].clone().requires_grad_(grad) for k in PARAMS}
    feats = None
    if grad:
        feats = torch.rand(n, 8, generator=torch.Generator().manual_seed(1)).requires_grad_()
    with torch.set_grad_enabled(grad):
        o = gsrender.rasterize(*(t[k] for k in PARAMS), sc["viewmat"], sc["K"], size, size,
                               sh_degree=3, features=feats, mode="sorted")
    res = {f"{n}.{k}": getattr(o, k).detach().clone()
           for k in ("colors", "depths", "alphas", "features") if getattr(o, k) is not None}
    res.update({f"{n}.meta.{k}": o.meta[k].detach().clone() for k in META})
    if grad:
        (o.colors.sum() + o.alphas.sum() + o.depths.sum() + o.features.sum()).backward()
        res.update({f"{n}.grad.{k}": v.grad.clone() for k, v in t.items()})
        res[f"{n}.grad.features"] = feats.grad.clone()
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out")
    d.add_argument("--n-fwd", type=int, default=1_000_000)
    d.add_argument("--n-grad", type=int, default=100_000)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    a = p.parse_args(argv)
    if a.cmd == "dump":
        res = outputs(a.n_fwd, False)
        res.update(outputs(a.n_grad, True))
        torch.save(res, a.out)
        print(f"{len(res)} tensors -> {a.out}")
        return 0
    x, y = torch.load(a.a), torch.load(a.b)
    differ = sorted(k for k in x.keys() | y.keys() if k not in x or k not in y or not torch.equal(x[k], y[k]))
    print(f"{len(x)} tensors; differ: {', '.join(differ) if differ else 'none'}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
