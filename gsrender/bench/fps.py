"""FPS profiling harness: per-stage timings of gsrender.rasterize over a camera set, with sweeps.

    gsrender bench [--quick | --smoke] [--out DIR] [scene] [sweeps]
    python benchmarks/fps.py ...            (the same, from a checkout)

Scene (one of): --scene FILE.ply|.splat with --colmap SPARSE_DIR (or orbit cameras when absent);
--mipnerf360 DIR (its test cameras, its point cloud as Gaussians); --preset NAME (synthetic,
gsrender.synthetic.make_preset; the default, "counter" scaled down so it runs on a CPU).
Sweeps (comma lists): --backend, --mode, --precision, --D, --resolution (WxH, or W keeping the
camera's aspect), --n (Gaussian counts: a synthetic scene is generated at each count, a loaded one
is subsampled). Every frame times project, sh, bin, raster_fwd (rasterize(profile=True)) and
raster_bwd (one backward of colors.sum() + features.sum(); CUDA events on a GPU, else the
monotonic clock); fps = 1000 / median forward ms. Peers on the same inputs: the scalar kernel
(precision="fp32") always; gsplat's `rasterization` on CUDA when importable; on the CPU, the
dense reference (gsrender.reference.render) for correctness only (max abs error, tiny case).
Writes fps.json, fps.md and time_vs_D.png, time_vs_N.png, stages.png to --out (default out/fps).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

import gsrender
from gsrender.bench.measure import Timer, env_block, median, p90, peak_memory, render_scene
from gsrender.io import atomic

STAGES = ("project", "sh", "bin", "raster_fwd", "raster_bwd")
DEFAULT_PRESET = "counter"

CONFIGS = {
    # n: Gaussian counts; res: resolutions; frames / warmup per run; views: cameras in the set
    "full": {"n": [200_000, 1_000_000], "res": ["640"], "D": [0, 16, 64], "frames": 10, "warmup": 2,
             "views": 5},
    "quick": {"n": [20_000, 60_000], "res": ["256"], "D": [0, 16, 64], "frames": 3, "warmup": 1,
              "views": 3},
    "smoke": {"n": [1_000], "res": ["48"], "D": [0, 8], "frames": 1, "warmup": 0, "views": 1},
}


# ---------------------------------------------------------------------------------------------
# scenes and cameras


def _scaled(K: torch.Tensor, w0: int, h0: int, w: int, h: int) -> torch.Tensor:
    """K for the same view at another image size (each axis scaled by its own ratio)."""
    K = K.clone().double()
    K[0] *= w / w0
    K[1] *= h / h0
    return K.float()


def _parse_res(spec: str, w0: int, h0: int) -> tuple[int, int]:
    if "x" in spec:
        w, h = (int(v) for v in spec.lower().split("x"))
    else:
        w = int(spec)
        h = max(1, round(h0 * w / w0))
    if w < 1 or h < 1:
        raise ValueError(f"--resolution: sizes must be positive, got {spec!r}")
    return w, h


def _tensors(model) -> dict:
    return {"means": model.means.float(), "quats": model.quats.float(), "scales": model.scales.float(),
            "opacities": model.opacities.float(), "sh": model.sh.float()}


def _subsample(t: dict, n: int) -> dict:
    total = t["means"].shape[0]
    if n >= total:
        return t
    idx = torch.randperm(total, generator=torch.Generator().manual_seed(0))[:n]
    return {k: v[idx] for k, v in t.items()}


class Scene:
    """Gaussians for a requested count, and the camera set: viewmats [V,4,4], Ks [V,3,3] at the
    native size (w0, h0)."""

    def __init__(self, args, cfg: dict):
        self.args, self.cfg, self._cache = args, cfg, {}
        if args.mipnerf360:
            from gsrender.io import load_mipnerf360_scene

            d = load_mipnerf360_scene(args.mipnerf360)
            if d["model"] is None:
                raise ValueError(f"--mipnerf360: no point cloud in {args.mipnerf360!r}")
            self.name, self.base = f"mipnerf360:{Path(args.mipnerf360).name}", _tensors(d["model"])
            self._cams(d["cameras"])
        elif args.scene:
            from gsrender.cameras import scene_orbit
            from gsrender.cli.common import default_up, load_model

            model = load_model(args.scene)
            self.name, self.base = str(args.scene), _tensors(model)
            if args.colmap:
                from gsrender.io import load_colmap_cameras

                self._cams(load_colmap_cameras(args.colmap))
            else:
                self._cams(scene_orbit(model.means, cfg["views"], 640, 480, 60.0,
                                       default_up(Path(args.scene))))
        else:
            from gsrender.synthetic import PRESETS

            if args.preset not in PRESETS:
                raise ValueError(f"--preset: expected one of {sorted(PRESETS)}, got {args.preset!r}")
            self.name, self.base = f"synthetic:{args.preset}", None
            spec = PRESETS[args.preset]
            self.w0, self.h0 = spec["width"], spec["height"]
            self.vms = self.Ks = None

    def _cams(self, cams: list) -> None:
        cams = cams[: self.cfg["views"]]
        if not cams:
            raise ValueError("the scene has no cameras")
        self.w0, self.h0 = cams[0].width, cams[0].height
        self.vms = torch.stack([c.viewmat for c in cams]).float()
        self.Ks = torch.stack([_scaled(c.K, c.width, c.height, self.w0, self.h0) for c in cams])

    def gaussians(self, n: int) -> dict:
        if self.base is not None:
            return _subsample(self.base, n)
        if n not in self._cache:
            from gsrender.synthetic import PRESETS, make_preset

            scale = n / PRESETS[self.args.preset]["n_gaussians"]
            model, vms, ks, _, _ = make_preset(self.args.preset, scale=scale, sh_degree=3,
                                               n_views=self.cfg["views"])
            self._cache = {n: _tensors(model)}  # one count at a time in memory
            self.vms, self.Ks = vms.float(), ks.float()
        return self._cache[n]

    def cameras(self, w: int, h: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.vms, torch.stack([_scaled(K, self.w0, self.h0, w, h) for K in self.Ks])


# ---------------------------------------------------------------------------------------------
# one run


def _loss(out):
    # the documented backward: colors.sum() + features.sum()
    loss = out.colors.sum()
    return loss + out.features.sum() if out.features is not None else loss


def _leaves(t: dict, feats):
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in t.items()}
    return leaves, (feats.detach().clone().requires_grad_(True) if feats is not None else None)


def kernel_name(precision: str, mode: str) -> str:
    return "scalar" if precision == "fp32" and mode == "sorted" else "matrix"


def run_one(t: dict, vms, Ks, w: int, h: int, D: int, mode: str, precision: str, device: torch.device,
            cfg: dict) -> dict:
    """Warm-up, then per frame (cycling the cameras): the forward's stages and one backward."""
    n = t["means"].shape[0]
    t = {k: v.to(device) for k, v in t.items()}
    vms, Ks = vms.to(device), Ks.to(device)
    feats = torch.rand(n, D, generator=torch.Generator().manual_seed(D)).to(device) if D else None
    leaves, fleaf = _leaves(t, feats)
    V = vms.shape[0]
    fwd, stages, pairs, eff = [], {s: [] for s in STAGES}, [], []
    with peak_memory(device) as mem:
        for i in range(cfg["warmup"] + cfg["frames"]):
            c = i % V
            for v in (*leaves.values(), fleaf):
                if v is not None:
                    v.grad = None
            with Timer(device) as tf:
                out = render_scene(leaves, fleaf, vms[c:c + 1], Ks[c:c + 1], w, h, mode, precision, True)
            loss = _loss(out)
            with Timer(device) as tb:
                loss.backward()
            if i < cfg["warmup"]:
                continue
            fwd.append(tf.ms)
            for s in STAGES[:-1]:
                stages[s].append(out.meta["timings_ms"][s])
            stages["raster_bwd"].append(tb.ms)
            pairs.append(int(out.meta["n_intersections"]))
            # the scalar kernel evaluates unpacked pairs and leaves the packing counters at 0
            if float(out.meta["stats"][:, 1].sum()) > 0:
                eff.append(gsrender.packing_efficiency(out.meta))
            del out, loss
    fwd_ms = median(fwd)
    return {"backend": device.type, "mode": mode, "precision": precision, "kernel": kernel_name(precision, mode),
            "peer": "gsrender", "D": D, "n_gaussians": n, "width": w, "height": h, "frames": len(fwd),
            "fps": 1e3 / fwd_ms if fwd_ms else None, "forward_ms": fwd_ms, "forward_p90_ms": p90(fwd),
            "stages_ms": {s: median(v) for s, v in stages.items()},
            "stages_p90_ms": {s: p90(v) for s, v in stages.items()},
            "n_pairs": int(median(pairs)), "packing_efficiency": median(eff),
            "peak_mem_mb": mem.delta_mb}


def run_gsplat(t: dict, vms, Ks, w: int, h: int, D: int, device: torch.device, cfg: dict) -> dict | None:
    """gsplat's rasterization on the same inputs (CUDA only; None when it is not importable).
    Features are rendered as extra colour channels after SH colour, as gsplat takes one colour
    tensor; stages are not separable there, so only forward / backward totals are reported."""
    if device.type != "cuda":
        return None
    try:
        from gsplat import rasterization
    except Exception:  # noqa: BLE001 (any import failure means: no peer)
        return None
    n = t["means"].shape[0]
    t = {k: v.to(device) for k, v in t.items()}
    leaves, fleaf = _leaves(t, torch.rand(n, D, device=device) if D else None)
    vms, Ks = vms.to(device), Ks.to(device)
    deg = round(t["sh"].shape[1] ** 0.5) - 1
    fwd, bwd = [], []
    with peak_memory(device) as mem:
        for i in range(cfg["warmup"] + cfg["frames"]):
            c = i % vms.shape[0]
            with Timer(device) as tf:
                colors, _, _ = rasterization(leaves["means"], leaves["quats"], leaves["scales"],
                                             leaves["opacities"], leaves["sh"], vms[c:c + 1], Ks[c:c + 1],
                                             w, h, sh_degree=deg)
                if fleaf is not None:
                    feats, _, _ = rasterization(leaves["means"], leaves["quats"], leaves["scales"],
                                                leaves["opacities"], fleaf, vms[c:c + 1], Ks[c:c + 1], w, h)
            loss = colors.sum() + (feats.sum() if fleaf is not None else 0)
            with Timer(device) as tb:
                loss.backward()
            if i >= cfg["warmup"]:
                fwd.append(tf.ms)
                bwd.append(tb.ms)
    f = median(fwd)
    none = dict.fromkeys(STAGES)
    return {"backend": "cuda", "mode": "sorted", "precision": "fp32", "kernel": "gsplat", "peer": "gsplat",
            "D": D, "n_gaussians": n, "width": w, "height": h, "frames": len(fwd),
            "fps": 1e3 / f if f else None, "forward_ms": f, "forward_p90_ms": p90(fwd),
            "stages_ms": dict(none, raster_bwd=median(bwd)), "stages_p90_ms": dict(none, raster_bwd=p90(bwd)),
            "n_pairs": None, "packing_efficiency": None, "peak_mem_mb": mem.delta_mb}


def reference_check(scene: Scene, D: int = 4, n: int = 300, size: int = 24) -> dict:
    """Max abs error of rasterize (matrix and scalar kernels) against the dense reference on a tiny
    case (CPU, float64 reference; not timed)."""
    from gsrender.reference import render as ref_render

    t = scene.gaussians(max(n, 1))
    t = _subsample(t, n)
    vms, Ks = scene.cameras(size, size)
    vm, K = vms[:1], Ks[:1]
    feats = torch.rand(t["means"].shape[0], D, generator=torch.Generator().manual_seed(1))
    deg = round(t["sh"].shape[1] ** 0.5) - 1
    d64 = {k: v.double() for k, v in t.items()}
    ref = ref_render(d64["means"], d64["quats"], d64["scales"], d64["opacities"], d64["sh"], vm.double(),
                     K.double(), size, size, sh_degree=deg, features=feats.double())
    res = {"n_gaussians": t["means"].shape[0], "width": size, "height": size, "D": D}
    with torch.no_grad():
        for prec in ("auto", "fp32"):
            out = render_scene(t, feats, vm, K, size, size, "sorted", prec, False)
            err = max((out.colors.double() - ref["colors"]).abs().max().item(),
                      (out.features.double() - ref["features"]).abs().max().item())
            res[f"max_abs_err_{kernel_name(prec, 'sorted')}"] = err
    return res


# ---------------------------------------------------------------------------------------------
# output


def _f(v, fmt=".2f") -> str:
    return "-" if v is None else format(v, fmt)


COLUMNS = ("backend", "mode", "kernel", "precision", "D", "N", "WxH", "fps", "project", "sh", "bin",
           "raster_fwd", "raster_bwd", "pairs", "pack eff", "peak MB")


def _cells(r: dict) -> list[str]:
    s = r["stages_ms"]
    return [r["backend"], r["mode"], r["kernel"], r["precision"], str(r["D"]), str(r["n_gaussians"]),
            f"{r['width']}x{r['height']}", _f(r["fps"], ".1f"), *(_f(s[k]) for k in STAGES),
            _f(r["n_pairs"], "d"), _f(r["packing_efficiency"], ".3f"), _f(r["peak_mem_mb"], ".0f")]


def markdown(result: dict) -> str:
    env = result["env"]
    lines = [f"# FPS benchmark ({result['config']}, scene {result['scene']})", "",
             (f"{env['device']}, {env['cpu']}, {env['cpu_threads']} threads, torch {env['torch']} "
             f"(CUDA {env['cuda']}), commit {env['commit'][:12]}, load average {env['loadavg']}"), "",
             "Stage columns: median ms per frame (p90 in fps.json); fps = 1000 / median forward ms.", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in result["runs"]]
    ref = result.get("reference_check")
    if ref:
        errs = ", ".join(f"{k[len('max_abs_err_'):]} {v:.2e}" for k, v in ref.items() if k.startswith("max_abs"))
        lines += ["", (f"Reference check ({ref['n_gaussians']} Gaussians, {ref['width']}x{ref['height']}, "
                      f"D={ref['D']}): max abs error {errs}")]
    return "\n".join(lines) + "\n"


def _series(runs: list[dict], x: str, fixed: tuple) -> dict:
    """{label: [(x, total ms), ...]}: forward+backward ms per run grouped by everything but x."""
    out: dict[str, list] = {}
    for r in runs:
        label = " ".join(f"{k}={r[k]}" for k in fixed if k != x)
        total = sum(v for v in r["stages_ms"].values() if v is not None)
        out.setdefault(label, []).append((r[x], total))
    return {k: sorted(v) for k, v in out.items()}


def plots(runs: list[dict], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    keys = ("backend", "mode", "kernel", "precision", "D", "n_gaussians", "width", "height")
    for x, fname, xlabel in (("D", "time_vs_D.png", "feature channels D"),
                             ("n_gaussians", "time_vs_N.png", "Gaussians N")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, pts in _series(runs, x, keys).items():
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("forward + backward ms / frame (median)")
        ax.set_title(f"time vs {x}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)
        written.append(fname)
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(runs) + 3), 4.5))
    labels = [f"{r['kernel']} {r['mode'][0]} D{r['D']}\nN{r['n_gaussians']} {r['width']}x{r['height']}"
              for r in runs]
    bottom = [0.0] * len(runs)
    for s in STAGES:
        vals = [r["stages_ms"][s] or 0.0 for r in runs]
        ax.bar(range(len(runs)), vals, bottom=bottom, label=s)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(runs)), labels, fontsize=6)
    ax.set_ylabel("ms / frame (median)")
    ax.set_title("stage breakdown")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "stages.png", dpi=110)
    plt.close(fig)
    return written + ["stages.png"]


# ---------------------------------------------------------------------------------------------
# command line


def _list(typ):
    def parse(s: str):
        try:
            return [typ(v.strip()) for v in s.split(",") if v.strip()]
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"expected a comma list, got {s!r}") from e
    return parse


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    speed = p.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true", help="small sweep, <= 2 minutes on a 2-core CPU")
    speed.add_argument("--smoke", action="store_true", help="tiny scene, 1 frame (seconds; for the tests)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--scene", help="a .ply / .splat scene (cameras: --colmap, else an orbit)")
    src.add_argument("--mipnerf360", metavar="DIR", help="a Mip-NeRF 360 scene folder")
    src.add_argument("--preset", default=DEFAULT_PRESET, help=f"synthetic preset (default {DEFAULT_PRESET})")
    p.add_argument("--colmap", metavar="SPARSE_DIR", help="COLMAP cameras for --scene")
    p.add_argument("--backend", type=_list(str), default=None, help="comma list of cpu,cuda (default: cuda "
                   "when available, else cpu)")
    p.add_argument("--mode", type=_list(str), default=["sorted"], help="comma list of sorted,weighted")
    p.add_argument("--precision", type=_list(str), default=["auto"],
                   help="comma list (auto,fp32,tf32,fp16,bf16); the scalar kernel fp32 is always added")
    p.add_argument("--D", type=_list(int), default=None, help="comma list of feature channel counts")
    p.add_argument("--resolution", type=_list(str), default=None, help="comma list of WxH or W")
    p.add_argument("--n", type=_list(int), default=None, help="comma list of Gaussian counts")
    p.add_argument("--frames", type=int, default=None, help="timed frames per run")
    p.add_argument("--warmup", type=int, default=None, help="untimed frames per run")
    p.add_argument("--views", type=int, default=None, help="cameras in the set (frames cycle over them)")
    p.add_argument("--no-peers", action="store_true", help="skip the scalar / gsplat / reference peers")
    p.add_argument("--out", default="out/fps", help="output folder (default out/fps)")
    return p


def _check(args) -> None:
    from gsrender.contract import MODES
    from gsrender.ops import PRECISIONS

    for name, vals, allowed in (("mode", args.mode, MODES), ("precision", args.precision, PRECISIONS),
                                ("backend", args.backend, ("cpu", "cuda"))):
        bad = [v for v in vals if v not in allowed]
        if bad or not vals:
            raise ValueError(f"--{name}: expected a comma list of {','.join(allowed)}, got {vals}")
    if "cuda" in args.backend and not torch.cuda.is_available():
        raise ValueError("--backend cuda: no CUDA device here")
    for name in ("D", "n"):
        if any(v < (0 if name == "D" else 1) for v in getattr(args, name)):
            raise ValueError(f"--{name}: values out of range: {getattr(args, name)}")


def run(args) -> dict:
    config = "smoke" if args.smoke else "quick" if args.quick else "full"
    cfg = dict(CONFIGS[config])
    for k in ("frames", "warmup", "views"):
        if getattr(args, k) is not None:
            cfg[k] = max(0 if k == "warmup" else 1, getattr(args, k))
    args.D = args.D if args.D is not None else cfg["D"]
    args.n = args.n if args.n is not None else cfg["n"]
    args.resolution = args.resolution or cfg["res"]
    args.backend = args.backend or (["cuda"] if torch.cuda.is_available() else ["cpu"])
    _check(args)
    precisions = list(dict.fromkeys(args.precision + ([] if args.no_peers else ["fp32"])))
    scene = Scene(args, cfg)
    t_start = time.perf_counter()
    runs = []
    for n in args.n:
        t = scene.gaussians(n)
        for res in args.resolution:
            w, h = _parse_res(res, scene.w0, scene.h0)
            vms, Ks = scene.cameras(w, h)
            for backend in args.backend:
                device = torch.device(backend)
                for mode in args.mode:
                    for prec in precisions:
                        if prec == "fp32" and mode != "sorted" and prec not in args.precision:
                            continue  # the scalar kernel exists for sorted mode only
                        for D in args.D:
                            r = run_one(t, vms, Ks, w, h, D, mode, prec, device, cfg)
                            runs.append(r)
                            _progress(len(runs), r)
                if not args.no_peers:
                    for D in args.D:
                        r = run_gsplat(t, vms, Ks, w, h, D, device, cfg)
                        if r is not None:
                            runs.append(r)
    result = {"config": config, "scene": scene.name, "runs": runs, "env": env_block(args.backend[0]),
              "settings": {k: cfg[k] for k in ("frames", "warmup", "views")},
              "reference_check": None, "gsplat_available": _gsplat_importable()}
    if not args.no_peers and "cpu" in args.backend:
        result["reference_check"] = reference_check(scene)
    result["total_s"] = time.perf_counter() - t_start
    if sys.stderr.isatty():
        print(file=sys.stderr)  # end the progress line
    return result


def _progress(done: int, r: dict) -> None:
    """One status line per run on stderr (rewritten in place on a terminal), not a table row: the
    table is printed once, at the end."""
    line = (f"{done} runs measured; last: {r['backend']} {r['mode']} {r['precision']} D={r['D']} "
            f"{r['n_gaussians']} Gaussians {r['width']}x{r['height']}: {_f(r['fps'], '.1f')} fps")
    if sys.stderr.isatty():
        print("\r\033[K" + line, end="", file=sys.stderr, flush=True)
    else:
        print(line, file=sys.stderr, flush=True)


def _gsplat_importable() -> bool:
    try:
        import gsplat  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = build_parser(prog).parse_args(argv)
    try:
        result = run(args)
    except ValueError as e:
        print(f"{prog or 'fps.py'}: error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "fps.json", json.dumps(result, indent=1))
    md = markdown(result)
    (out / "fps.md").write_text(md)
    pngs = plots(result["runs"], out)
    print(md)
    print(f"wrote fps.json, fps.md, {', '.join(pngs)} to {out} ({result['total_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
