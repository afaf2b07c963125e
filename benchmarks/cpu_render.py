"""CPU rendering benchmark: forward / backward ms per frame, the accumulation's achieved GFLOP/s
next to this machine's sgemm GFLOP/s (measured in the same run), peak memory, packing efficiency,
and the matrix path's speedup over the in-house scalar per-pixel path (precision="fp32").

    python benchmarks/cpu_render.py [--quick | --smoke] [--out DIR] [--mode sorted|weighted]

Scenes: the bundled sample (data/sample), the Mip-NeRF 360 garden points
(../shared/data/garden/test_garden.npz, skipped when absent) and a synthetic 1M-Gaussian scene
(gsrender.synthetic.make_preset, default "counter") at 512² and at the preset's resolution
(~1558×1038); D ∈ {0, 16, 64, 256} feature channels rendered with RGB + depth (CH = 4 + D).
The 1M preset-resolution group runs in a subprocess so its peak memory is its own.

Accumulation flops = 2 · computed_pairs · CH, computed_pairs = Σ meta["stats"][:, 1] (the
(pixel, Gaussian) pairs the packed GEMM evaluated), over the rasterize forward stage's time.
--quick: smaller scenes (under 2 minutes); --smoke: tiny (a few seconds, for the tests).
Writes cpu_render.json and cpu_render.md to --out when given; always prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gsrender
from benchmarks.common import PeakMemory, _loadavg, environment, mem_available_mb, sgemm_gflops

SHARED = ROOT.parent / "shared" / "data"
SAMPLE = ROOT / "data" / "sample"
GARDEN = SHARED / "garden" / "test_garden.npz"
STAGES = ("project", "sh", "bin", "raster_fwd")
SCALAR_DS = (0, 64)  # the cases also timed on the scalar per-pixel path

CONFIGS = {
    # n_synth: Gaussians of the synthetic scene; small: its square resolution; big_div: the preset
    # resolution divided by this; sample_div, garden_div: those scenes' resolutions divided by this
    "full": {"n_synth": 1_000_000, "small": 512, "big_div": 1, "sample_div": 1, "garden_div": 1,
             "Ds": (0, 16, 64, 256), "runs": 3, "warmup": 1, "garden": True, "gemm_square": 2048,
             "scalar_Ds": SCALAR_DS},
    "quick": {"n_synth": 100_000, "small": 256, "big_div": 3, "sample_div": 1, "garden_div": 2,
              "Ds": (0, 16, 64, 256), "runs": 2, "warmup": 1, "garden": True, "gemm_square": 1024,
              "scalar_Ds": SCALAR_DS},
    "smoke": {"n_synth": 3_000, "small": 64, "big_div": 16, "sample_div": 4, "garden_div": 8, "Ds": (0, 16),
              "runs": 1, "warmup": 0, "garden": False, "gemm_square": 256, "scalar_Ds": (0,)},
}


# ---------------------------------------------------------------------------------------------
# scenes


def _scaled_K(K: torch.Tensor, width: int, height: int, new_w: int, new_h: int) -> torch.Tensor:
    """The view at another image size: same horizontal field of view and pixel aspect, the
    principal point at the same relative position (a 3:2 camera becomes a square one by
    cropping / extending the top and bottom)."""
    s = new_w / width
    return torch.tensor([[K[0, 0].item() * s, 0.0, K[0, 2].item() * s],
                         [0.0, K[1, 1].item() * s, K[1, 2].item() * new_h / height], [0.0, 0.0, 1.0]])


def _scene_tensors(model) -> dict:
    return {"means": model.means, "quats": model.quats, "scales": model.scales,
            "opacities": model.opacities, "sh": model.sh}


def load_scene(name: str, cfg: dict, cache_dir: Path) -> tuple[dict, torch.Tensor, torch.Tensor, list]:
    """(tensors, viewmat [1,4,4], K at native size [1,3,3], [(label, width, height), ...]).
    The synthetic scene is cached as a .pt file (weights_only) so a subprocess need not rebuild it."""
    if name == "sample":
        from gsrender.cli import load_cameras
        from gsrender.io import load_ply

        cam = load_cameras(SAMPLE / "cameras.json")[0]
        d = cfg["sample_div"]
        w, h = max(16, cam.width // d), max(16, cam.height // d)
        return (_scene_tensors(load_ply(SAMPLE / "scene.ply")), cam.viewmat[None],
                _scaled_K(cam.K, cam.width, cam.height, w, h)[None], [(f"{w}x{h}", w, h)])
    if name == "garden":
        from gsrender.synthetic import garden_scene

        model, vms, ks, w, h = garden_scene(GARDEN)
        d = cfg["garden_div"]
        sw, sh = max(16, w // d), max(16, h // d)
        return _scene_tensors(model), vms[:1], _scaled_K(ks[0], w, h, sw, sh)[None], [(f"{sw}x{sh}", sw, sh)]
    if name.startswith("synth"):
        path = cache_dir / f"synth_{cfg['n_synth']}_{cfg['preset']}.pt"
        if path.is_file():
            d = torch.load(path, weights_only=True)
        else:
            from gsrender.synthetic import PRESETS, make_preset

            scale = cfg["n_synth"] / PRESETS[cfg["preset"]]["n_gaussians"]
            model, vms, ks, w, h = make_preset(cfg["preset"], scale=scale, sh_degree=3, n_views=1)
            d = dict(_scene_tensors(model), viewmat=vms[:1], K=ks[:1], size=torch.tensor([w, h]))
            torch.save(d, path)
        w, h = (int(v) for v in d.pop("size"))
        vm, K = d.pop("viewmat"), d.pop("K")
        s = cfg["small"]
        bw, bh = max(16, w // cfg["big_div"]), max(16, h // cfg["big_div"])
        sizes = [(f"{s}x{s}", s, s)] if name == "synth_small" else [(f"{bw}x{bh}", bw, bh)]
        return d, vm, _scaled_K(K[0], w, h, sizes[0][1], sizes[0][2])[None], sizes
    raise ValueError(f"scene: unknown {name!r}")


def estimate_mb(n: int, width: int, height: int, ch: int) -> float:
    """Rough forward+backward footprint: per-Gaussian channel tensors (features, their concat
    with RGB/depth, and both gradients) and per-pixel images (render, its gradient, scratch)."""
    return (5 * n * ch * 4 + 4 * width * height * ch * 4 + n * 400) / 2**20


# ---------------------------------------------------------------------------------------------
# one case


def _render(t: dict, feats, vm, K, w, h, mode: str, precision: str, profile: bool):
    deg = round(t["sh"].shape[1] ** 0.5) - 1
    return gsrender.rasterize(t["means"], t["quats"], t["scales"], t["opacities"], t["sh"], vm, K, w, h,
                              sh_degree=deg, features=feats, mode=mode, precision=precision,
                              profile=profile)


def run_case(t: dict, vm, K, label: str, w: int, h: int, D: int, cfg: dict) -> dict:
    n = t["means"].shape[0]
    ch = 4 + D
    row = {"n_gaussians": n, "resolution": label, "width": w, "height": h, "D": D, "CH": ch,
           "mode": cfg["mode"]}
    need, avail = estimate_mb(n, w, h, ch), mem_available_mb()
    if avail is not None and need > 0.8 * avail:
        row["skipped"] = f"needs ~{need:.0f} MB, {avail:.0f} MB available"
        return row
    g = torch.Generator().manual_seed(D)
    feats = torch.rand(n, D, generator=g) if D else None
    runs, warm = cfg["runs"], cfg["warmup"]
    with PeakMemory() as mem:
        with torch.no_grad():
            for _ in range(warm):
                _render(t, feats, vm, K, w, h, cfg["mode"], "auto", False)
            fwd, stages = [], {s: [] for s in STAGES}
            for _ in range(runs):
                t0 = time.perf_counter()
                out = _render(t, feats, vm, K, w, h, cfg["mode"], "auto", True)
                fwd.append((time.perf_counter() - t0) * 1e3)
                for s in STAGES:
                    stages[s].append(out.meta["timings_ms"][s])
        stats = out.meta["stats"].sum(0).tolist()  # tile-list pairs, computed pairs, contributing
        del out
        leaves = {k: v.detach().clone().requires_grad_(True) for k, v in t.items()}
        fleaf = feats.clone().requires_grad_(True) if D else None
        bwd = []
        for i in range(warm + runs):
            out = _render(leaves, fleaf, vm, K, w, h, cfg["mode"], "auto", False)
            outs = [o for o in (out.colors, out.depths, out.alphas, out.features) if o is not None]
            grads = [torch.ones_like(o) for o in outs]
            t0 = time.perf_counter()
            torch.autograd.backward(outs, grads)
            if i >= warm:
                bwd.append((time.perf_counter() - t0) * 1e3)
            del out, outs, grads
            for v in (*leaves.values(), fleaf):
                if v is not None:
                    v.grad = None
    raster = statistics.median(stages["raster_fwd"])
    row.update(
        fwd_ms=statistics.median(fwd), bwd_ms=statistics.median(bwd),
        stages_ms={s: statistics.median(v) for s, v in stages.items()},
        pairs_tile=int(stats[0]), pairs_computed=int(stats[1]), pairs_contributing=int(stats[2]),
        packing_efficiency=stats[2] / max(stats[1], 1),
        accum_gflops=2 * stats[1] * ch / (raster * 1e-3) / 1e9 if raster > 0 else None,
        peak_mb=mem.delta_mb, peak_abs_mb=mem.peak_mb, peak_method=mem.method)
    if D in cfg["scalar_Ds"]:
        with torch.no_grad():
            sc, sr = [], []
            for i in range(warm + runs):
                t0 = time.perf_counter()
                out = _render(t, feats, vm, K, w, h, cfg["mode"], "fp32", True)
                if i >= warm:
                    sc.append((time.perf_counter() - t0) * 1e3)
                    sr.append(out.meta["timings_ms"]["raster_fwd"])
        row.update(scalar_fwd_ms=statistics.median(sc), scalar_raster_ms=statistics.median(sr),
                   scalar_speedup=statistics.median(sr) / raster if raster > 0 else None)
    return row


def run_group(scene: str, cfg: dict, cache_dir: Path) -> list[dict]:
    t, vm, K, sizes = load_scene(scene, cfg, cache_dir)
    rows = []
    for label, w, h in sizes:
        for D in cfg["Ds"]:
            row = {"scene": scene.split("_")[0] if scene.startswith("synth") else scene, "process": cfg["where"]}
            row.update(run_case(t, vm, K, label, w, h, D, cfg))
            rows.append(row)
            print(_line(row), file=sys.stderr, flush=True)
    return rows


def run_group_subprocess(scene: str, cfg: dict, cache_dir: Path) -> list[dict]:
    spec = json.dumps({"scene": scene, "cfg": dict(cfg, where="subprocess"), "cache": str(cache_dir)})
    with tempfile.NamedTemporaryFile("r", suffix=".json") as res:
        proc = subprocess.run([sys.executable, __file__, "--worker", spec, "--worker-out", res.name],
                              stdout=subprocess.DEVNULL, stderr=None, check=False)
        if proc.returncode != 0:
            return [{"scene": "synth", "process": "subprocess",
                     "skipped": f"subprocess failed (exit {proc.returncode})"}]
        return json.loads(Path(res.name).read_text())


# ---------------------------------------------------------------------------------------------
# report


def _f(v, fmt: str) -> str:
    return "–" if v is None else format(v, fmt)


COLUMNS = ("scene", "N", "res", "D", "fwd ms", "bwd ms", "raster ms", "GFLOP/s", "% sgemm", "pack eff",
           "peak MB", "scalar ×")


def _cells(r: dict, gemm: dict | None = None) -> list[str]:
    if "skipped" in r:
        return [r["scene"], _f(r.get("n_gaussians"), ","), r.get("resolution", "–"), str(r.get("D", "–")),
                f"skipped: {r['skipped']}"] + [""] * 7
    ref = None if gemm is None else gemm["tile"].get(str(r["CH"]))
    pct = None if ref is None or r["accum_gflops"] is None else 100 * r["accum_gflops"] / ref
    return [r["scene"], f"{r['n_gaussians']:,}", r["resolution"], str(r["D"]), _f(r["fwd_ms"], ".1f"),
            _f(r["bwd_ms"], ".1f"), _f(r["stages_ms"]["raster_fwd"], ".1f"), _f(r["accum_gflops"], ".1f"),
            _f(pct, ".0f"), _f(r["packing_efficiency"], ".2f"), _f(r["peak_mb"], ".0f"),
            _f(r.get("scalar_speedup"), ".2f")]


def _line(r: dict) -> str:
    return "  ".join(_cells(r))


def markdown(rows: list[dict], gemm: dict, env: dict) -> str:
    machine = (f"{env['cpu']}, {env['threads']} threads, torch {env['torch']}, gsrender {env['gsrender']}; "
               f"load average {env['loadavg_start']} at start, {env.get('loadavg_end')} at end")
    tiles = ", ".join(f"CH={c}: {v:.1f}" for c, v in gemm["tile"].items())
    sgemm = (f"sgemm (torch.mm {gemm['square_n']}²): {gemm['square']:.1f} GFLOP/s; tile-shaped "
             f"[256,{gemm['tile_k']}]×[{gemm['tile_k']},CH]: {tiles} GFLOP/s")
    lines = [f"# CPU render benchmark ({env['config']}, mode={env['mode']})", "", machine, "", sgemm, "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cells(r, gemm)) + " |" for r in rows]
    lines += ["", ("Times are medians. GFLOP/s = 2·computed pairs·CH / raster_fwd time; % sgemm = that "
                   "over the tile-shaped sgemm (best of 5) at the same CH; peak MB = resident-memory peak "
                   "above the case's start; scalar × = scalar per-pixel raster_fwd time / matrix raster_fwd "
                   "time.")]
    return "\n".join(lines) + "\n"


def text_table(rows: list[dict], gemm: dict) -> str:
    full = [list(COLUMNS)] + [_cells(r, gemm) for r in rows if "skipped" not in r]
    widths = [max(len(c[i]) for c in full) for i in range(len(COLUMNS))]
    lines = []
    for r in [None, *rows]:
        cells = list(COLUMNS) if r is None else _cells(r, gemm)
        if r is not None and "skipped" in r:  # the reason runs on past the numeric columns
            lines.append("  ".join(c.rjust(widths[i]) for i, c in enumerate(cells[:4])) + "  " + cells[4])
        else:
            lines.append("  ".join(c.rjust(widths[i]) for i, c in enumerate(cells)))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller scenes, under 2 minutes")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds (tests; wins over --quick)")
    p.add_argument("--out", default=None, help="folder for cpu_render.json and cpu_render.md")
    p.add_argument("--mode", choices=("sorted", "weighted"), default="sorted")
    p.add_argument("--preset", default="counter", help="synthetic preset for the large scene")
    p.add_argument("--runs", type=int, default=None, help="timed runs per case (median)")
    p.add_argument("--no-subprocess", action="store_true", help="run the large group in this process")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:  # one scene group in a fresh process (its own peak memory)
        spec = json.loads(args.worker)
        rows = run_group(spec["scene"], spec["cfg"], Path(spec["cache"]))
        Path(args.worker_out).write_text(json.dumps(rows))
        return 0
    config = "smoke" if args.smoke else "quick" if args.quick else "full"
    cfg = dict(CONFIGS[config], mode=args.mode, preset=args.preset, where="main")
    cfg["Ds"], cfg["scalar_Ds"] = list(cfg["Ds"]), list(cfg["scalar_Ds"])
    if args.runs:
        cfg["runs"] = args.runs
    env = environment(config, args.mode)
    t_start = time.perf_counter()
    print(f"gsrender CPU benchmark ({config}): {env['cpu']}, {env['threads']} threads", file=sys.stderr)
    gemm = sgemm_gflops(sorted({4 + d for d in cfg["Ds"]}), cfg["gemm_square"])
    print(f"sgemm {gemm['square_n']}²: {gemm['square']:.1f} GFLOP/s; tile-shaped: "
          + ", ".join(f"CH={c}: {v:.1f}" for c, v in gemm["tile"].items()), file=sys.stderr)

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="gsr_bench_") as tmp:
        cache = Path(tmp)
        if (SAMPLE / "scene.ply").is_file() and (SAMPLE / "cameras.json").is_file():
            rows += run_group("sample", cfg, cache)
        else:
            rows.append({"scene": "sample", "skipped": f"{SAMPLE} missing"})
        if not cfg["garden"]:
            rows.append({"scene": "garden", "skipped": f"not in --{config}"})
        elif GARDEN.is_file():
            rows += run_group("garden", cfg, cache)
        else:
            rows.append({"scene": "garden", "skipped": f"{GARDEN} missing"})
        rows += run_group("synth_small", cfg, cache)  # also builds and caches the synthetic scene
        if args.no_subprocess:
            rows += run_group("synth_big", cfg, cache)
        else:
            rows += run_group_subprocess("synth_big", cfg, cache)

    print("\n" + text_table(rows, gemm))
    for r in rows:
        if r.get("scalar_speedup") is not None:
            print(f"matrix vs scalar per-pixel path, {r['scene']} {r['resolution']} D={r['D']}: raster_fwd "
                  f"{r['stages_ms']['raster_fwd']:.1f} ms vs {r['scalar_raster_ms']:.1f} ms "
                  f"({r['scalar_speedup']:.2f}× faster)")
    env["loadavg_end"] = _loadavg()
    print(f"total {time.perf_counter() - t_start:.0f} s (load average at start {env['loadavg_start']}, "
          f"end {env['loadavg_end']})")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "cpu_render.json").write_text(json.dumps({"env": env, "config": cfg, "sgemm_gflops": gemm,
                                                         "results": rows}, indent=1))
        (out / "cpu_render.md").write_text(markdown(rows, gemm, env))
        print(f"wrote {out / 'cpu_render.json'} and {out / 'cpu_render.md'}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
