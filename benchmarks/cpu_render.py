"""CPU rendering benchmark: forward / backward ms per frame, the accumulation's achieved GFLOP/s
next to this machine's sgemm GFLOP/s (measured in the same run), peak memory, packing efficiency,
and the matrix path's speedup over the in-house scalar per-pixel path (precision="fp32").

    python benchmarks/cpu_render.py [--quick | --smoke] [--out DIR] [--mode sorted|weighted]
    python benchmarks/cpu_render.py --targets [--smoke] [--out DIR]   # the CPU targets
    python benchmarks/cpu_render.py --ab BASE [--new CHECKOUT] [--rounds 2] [--n 100000] [--D 0,64]
    python benchmarks/cpu_render.py --dump FILE [--n-fwd 1000000] [--n-grad 100000]
    python benchmarks/cpu_render.py --compare A B          # exit status 1 when some tensor differs

--targets: the benchmark scene (benchmarks/common.py random_box_scene: N Gaussians uniform in front of the camera, 5 units
away, log-normal scales with median e^-4 and σ 0.6 in log space, sigmoid-normal opacities, SH
degree 3; a 512² pinhole camera with f = 500): 100k Gaussians for D ∈ {0, 16, 64, 256} (forward,
forward + backward, stage times, the scalar kernel's forward side by side) and 1M Gaussians (RGB
forward and its per-Gaussian stages' share), each the median of --runs (default 5) after a
warm-up, the cases of a scene interleaved (each round runs every case once), and the peak resident memory of a forward + backward of 1M Gaussians at 1920×1080
(benchmarks/cpu_memory.py, a fresh process), checked against the CPU targets (docs/cpu.md); writes cpu_targets.json / .md and the plot of
time against D (cpu_targets_vs_D.png) to --out.

Scenes: the bundled sample (data/sample), the Mip-NeRF 360 garden points
(../shared/data/garden/test_garden.npz, skipped when absent) and a synthetic 1M-Gaussian scene
(gsrender.synthetic.make_preset, default "counter") at 512² and at the preset's resolution
(~1558×1038); D ∈ {0, 16, 64, 256} feature channels rendered with RGB + depth (CH = 4 + D).
The 1M preset-resolution group runs in a subprocess so its peak memory is its own.

Accumulation flops = 2 · computed_pairs · CH, computed_pairs = Σ meta["stats"][:, 1] (the
(pixel, Gaussian) pairs the packed GEMM evaluated), over the rasterize forward stage's time.
--quick: smaller scenes (under 2 minutes); --smoke: tiny (a few seconds, for the tests).
Writes cpu_render.json and cpu_render.md to --out when given; always prints the table.

--ab BASE: two builds side by side on the benchmark scene (the targets' cases at --n Gaussians,
512², each D of --D): one subprocess per build per round, in alternating order, so both see the
same machine load; each build's medians over the rounds and their ratio base/new (outside_ms: the
forward's time outside its timed stages: input checks, glue, freeing its outputs). BASE and --new
(default: this checkout) are checkouts with their extension built in place.

--dump FILE: every output of the benchmark scene (sorted, SH degree 3, 512²) in one file: the
forward at --n-fwd Gaussians (images, radii, means2d, depths, conics, opacities, tile lists,
stats) and forward + backward at --n-grad with 8 features (the images and every input's
gradient). --compare A B names the tensors two dumps differ in, bit for bit: the check behind a
"same outputs" claim for a CPU change (dump once per build, and per instruction-set copy with
GSRENDER_CPU_ISA=avx2 etc.).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# gsrender before torch, as the `gsrender` command does: its OpenMP wait policy and huge-page
# allocation defaults (gsrender/__init__.py) apply only so; environment() records them
import gsrender  # noqa: I001
from gsrender.io.paths import data_dir
from gsrender.io import atomic
import torch

from benchmarks.common import (PeakMemory, _loadavg, environment, mem_available_mb, random_box_scene,
                               render_scene, sgemm_gflops)

SHARED = data_dir()
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
        from gsrender.cameras import load_cameras_json
        from gsrender.io import load_ply

        cam = load_cameras_json(SAMPLE / "cameras.json")[0]
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
                render_scene(t, feats, vm, K, w, h, cfg["mode"], "auto", False)
            fwd, stages = [], {s: [] for s in STAGES}
            for _ in range(runs):
                t0 = time.perf_counter()
                out = render_scene(t, feats, vm, K, w, h, cfg["mode"], "auto", True)
                fwd.append((time.perf_counter() - t0) * 1e3)
                for s in STAGES:
                    stages[s].append(out.meta["timings_ms"][s])
        stats = out.meta["stats"].sum(0).tolist()  # tile-list pairs, computed pairs, contributing
        del out
        leaves = {k: v.detach().clone().requires_grad_(True) for k, v in t.items()}
        fleaf = feats.clone().requires_grad_(True) if D else None
        bwd = []
        for i in range(warm + runs):
            out = render_scene(leaves, fleaf, vm, K, w, h, cfg["mode"], "auto", False)
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
                out = render_scene(t, feats, vm, K, w, h, cfg["mode"], "fp32", True)
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
# the benchmark scene and targets (--targets)

TARGET_DS = (0, 16, 64, 256)
TARGET_SIZES = {"full": (100_000, 1_000_000, 512), "smoke": (2_000, 5_000, 64)}


def _ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def target_cases(sc: dict, Ds, runs: int, warmup: int, scalar_ds=(), train: bool = True) -> list[dict]:
    """Per feature width D of one scene: the forward (and its stages, pairs), the forward +
    backward (every input a leaf) and, for D in scalar_ds, the scalar kernel's forward. Measured
    interleaved: each of the runs rounds times every case once, in turn, so a slow stretch of a
    shared machine falls on all of them alike rather than on one case's block of runs (the targets
    are ratios between these cases); medians over the rounds, after warmup rounds."""
    size = int(sc["K"][0, 0, 2] * 2)
    t = {k: sc[k] for k in ("means", "quats", "scales", "opacities", "sh")}
    leaves = {k: v.clone().requires_grad_(True) for k, v in t.items()}
    vm, K = sc["viewmat"], sc["K"]

    def case(D: int):
        feats = torch.rand(t["means"].shape[0], D, generator=torch.Generator().manual_seed(D)) if D else None
        fleaf = feats.clone().requires_grad_(True) if D else None

        @torch.no_grad()
        def render(precision="auto", profile=False):
            return render_scene(t, feats, vm, K, size, size, "sorted", precision, profile)

        def step():
            out = render_scene(leaves, fleaf, vm, K, size, size, "sorted", "auto", False)
            loss = out.colors.sum() + out.alphas.sum() + (out.features.sum() if D else 0)
            for v in (*leaves.values(), fleaf):  # zero_grad(set_to_none=True), as a training
                if v is not None:                # loop does: no accumulation into old grads
                    v.grad = None
            loss.backward()

        def profiled():
            # the output dropped before the next run, as in the timed runs: holding every profiled
            # output made each run fault in fresh pages for its own (at D = 256 the raster stage
            # then read slower than the whole un-profiled forward)
            m = render(profile=True).meta
            return {k: m[k] for k in ("timings_ms", "stats", "n_intersections")}

        timed = {"fwd_ms": render}
        if D in scalar_ds:
            timed["scalar_fwd_ms"] = lambda: render(precision="fp32")
        if train:
            timed["fwd_bwd_ms"] = step
        return timed, profiled

    cases = {D: case(D) for D in Ds}
    times = {D: {k: [] for k in timed} for D, (timed, _) in cases.items()}
    metas = {D: [] for D in Ds}
    for r in range(warmup + runs):
        for D, (timed, profiled) in cases.items():
            for k, fn in timed.items():
                ms = _ms(fn)
                if r >= warmup:
                    times[D][k].append(ms)
            if r >= warmup:
                metas[D].append(profiled())
    rows = []
    for D in Ds:
        m = metas[D]
        st = m[0]["stats"].sum(0).tolist()
        rows.append({"n_gaussians": t["means"].shape[0], "size": size, "D": D,
                     **{k: statistics.median(v) for k, v in times[D].items()},
                     "rounds_ms": times[D],  # each round's ms, in round order (per-round ratios)
                     "stages_ms": {s: statistics.median(x["timings_ms"][s] for x in m) for s in STAGES},
                     "rounds_stages_ms": [{s: x["timings_ms"][s] for s in STAGES} for x in m],
                     "pairs": int(m[0]["n_intersections"]), "pairs_listed": int(st[0]),
                     "pairs_computed": int(st[1]), "pairs_contributing": int(st[2])})
    return rows


def run_targets(config: str, runs: int, out_dir: Path | None) -> int:
    n_small, n_big, size = TARGET_SIZES["smoke" if config == "smoke" else "full"]
    warmup = 1
    env = environment(config, "sorted")
    print(f"gsrender CPU targets ({config}): {env['cpu']}, {env['threads']} threads", file=sys.stderr)
    sc = random_box_scene(n_small, size)
    rows = target_cases(sc, TARGET_DS, runs, warmup, scalar_ds=(0, 64))
    for r in rows:
        print(json.dumps(r), file=sys.stderr, flush=True)
    # the accumulation's own shapes: [256 pixels, K] × [K, CH] per 16-px tile, K = the scene's
    # Gaussians per tile (its tile–Gaussian pairs over its tiles)
    k = max(1, round(rows[0]["pairs"] / math.ceil(size / 16) ** 2))
    gemm = sgemm_gflops([4 + d for d in TARGET_DS], 1024 if config == "smoke" else 2048, k=k)
    big, = target_cases(random_box_scene(n_big, size), (0,), max(3, runs // 2), warmup, train=False)
    print(json.dumps(big), file=sys.stderr, flush=True)
    mem, mem_target = memory_target(config)
    env["loadavg_end"] = _loadavg()
    res = summarize_targets(rows, big, gemm) + [mem_target]
    md = targets_markdown(rows, big, gemm, res, env)
    print(md)
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic.write_text(out_dir / "cpu_targets.json", json.dumps(
            {"env": env, "sgemm_gflops": gemm, "cases": rows, "big": big, "memory": mem, "targets": res}, indent=1))
        (out_dir / "cpu_targets.md").write_text(md)
        plot_vs_D(rows, out_dir / "cpu_targets_vs_D.png")
        print(f"wrote {out_dir}/cpu_targets.json, .md and _vs_D.png", file=sys.stderr)
    return 0


def memory_target(config: str) -> tuple[dict, dict]:
    """The memory target: peak resident memory of a forward + backward of 1M Gaussians at
    1920×1080 (benchmarks/cpu_memory.py, in a fresh process; --smoke: 5k at 192×108)."""
    from benchmarks.cpu_memory import memory_case

    n, w, h = (5_000, 192, 108) if config == "smoke" else (1_000_000, 1920, 1080)
    row = memory_case(n, w, h)
    print(json.dumps(row), file=sys.stderr, flush=True)
    peak = row.get("peak_rss_mb")
    return row, {"target": f"{n:,} @{w}x{h} fwd+bwd peak RSS MB", "goal": "<= 2048", "value": peak,
                 "ok": peak is not None and peak <= 2048}


def _round_range(num: list[float], den: list[float] | None = None) -> list[float]:
    """[min, max] over the rounds of num[r] (a time) or num[r] / den[r] (a ratio of two figures
    timed in the same round, side by side)."""
    v = num if den is None else [a / b for a, b in zip(num, den, strict=True)]
    return [min(v), max(v)]


def summarize_targets(rows: list[dict], big: dict, gemm: dict) -> list[dict]:
    """The CPU targets against this run: the value from the medians over the rounds and,
    for times and ratios, "range": [min, max] of the same figure in each round on its own (a
    target met by the medians but not in every round is one the machine's load decides).
    Accumulation GFLOP/s: the feature channels' useful flops (2 · contributing pairs · D) over the
    raster time they add to the RGB render (α, the scan and the RGB channels are the same work at
    every D), against the tile-shaped sgemm."""
    by_d = {r["D"]: r for r in rows}
    rgb = by_d[0]
    stages = ("project", "sh", "bin")
    per_gauss = sum(big["stages_ms"][s] for s in stages)
    rounds_per_gauss = [sum(st[s] for s in stages) for st in big["rounds_stages_ms"]]
    small, large = f"{rgb['n_gaussians']:,}", f"{big['n_gaussians']:,}"
    res = [{"target": f"{small} RGB forward ms", "goal": "<= 60", "value": rgb["fwd_ms"], "ok": rgb["fwd_ms"] <= 60,
            "range": _round_range(rgb["rounds_ms"]["fwd_ms"])},
           {"target": f"{large} RGB forward ms", "goal": "<= 300", "value": big["fwd_ms"], "ok": big["fwd_ms"] <= 300,
            "range": _round_range(big["rounds_ms"]["fwd_ms"])},
           {"target": f"{large} per-Gaussian stages share", "goal": "<= 0.25", "value": per_gauss / big["fwd_ms"],
            "ok": per_gauss / big["fwd_ms"] <= 0.25,
            "range": _round_range(rounds_per_gauss, big["rounds_ms"]["fwd_ms"])}]
    for D, goal in ((64, 1.5), (256, 3.0)):
        if D in by_d:
            v = by_d[D]["fwd_ms"] / rgb["fwd_ms"]
            res.append({"target": f"D={D} forward / RGB forward", "goal": f"<= {goal}", "value": v, "ok": v <= goal,
                        "range": _round_range(by_d[D]["rounds_ms"]["fwd_ms"], rgb["rounds_ms"]["fwd_ms"])})
    for D in (64, 256):
        if D in by_d:
            extra = (by_d[D]["stages_ms"]["raster_fwd"] - rgb["stages_ms"]["raster_fwd"]) * 1e-3
            flops = 2 * by_d[D]["pairs_contributing"] * D
            gf = flops / extra / 1e9 if extra > 0 else None
            ref = gemm["tile"][str(4 + D)]
            res.append({"target": f"D={D} accumulation / sgemm", "goal": ">= 0.40", "gflops": gf, "sgemm": ref,
                        "value": None if gf is None else gf / ref, "ok": gf is not None and gf / ref >= 0.40})
    for D in (0, 64):
        if D in by_d:
            v = by_d[D]["fwd_bwd_ms"] / by_d[D]["fwd_ms"]
            res.append({"target": f"D={D} forward+backward / forward", "goal": "<= 2.5", "value": v, "ok": v <= 2.5,
                        "range": _round_range(by_d[D]["rounds_ms"]["fwd_bwd_ms"], by_d[D]["rounds_ms"]["fwd_ms"])})
    return res


def targets_markdown(rows, big, gemm, res, env) -> str:
    machine = (f"{env['cpu']}, {env['threads']} threads, torch {env['torch']}; load average "
               f"{env['loadavg_start']} at start, {env['loadavg_end']} at end (other processes share the "
               "cores: absolute ms are noisy, ratios within this run are the figures to read)")
    lines = ["# CPU renderer: targets", "", machine, "",
             "| N | D | fwd ms | fwd+bwd ms | (fwd+bwd)/fwd | project | sh | bin | raster_fwd | pairs | "
             "contributing | scalar fwd ms | scalar / matrix |", "|" + "---|" * 13]
    for r in [*rows, big]:
        sc = r.get("scalar_fwd_ms")
        fb = r.get("fwd_bwd_ms")
        st = r["stages_ms"]
        lines.append(f"| {r['n_gaussians']:,} | {r['D']} | {r['fwd_ms']:.1f} | {_f(fb, '.1f')} | "
                     f"{_f(None if fb is None else fb / r['fwd_ms'], '.2f')} | {st['project']:.1f} | {st['sh']:.1f} | "
                     f"{st['bin']:.1f} | {st['raster_fwd']:.1f} | {r['pairs']:,} | {r['pairs_contributing']:,} | "
                     f"{_f(sc, '.1f')} | {_f(None if sc is None else sc / r['fwd_ms'], '.2f')} |")
    lines += ["", "| target | goal | this run | each round | met |", "|---|---|---|---|---|"]
    for t in res:
        extra = f" ({t['gflops']:.1f} vs {t['sgemm']:.1f} GFLOP/s)" if t.get("gflops") else ""
        rr = "–" if "range" not in t else f"{t['range'][0]:.3g} – {t['range'][1]:.3g}"
        lines.append(f"| {t['target']} | {t['goal']} | {_f(t['value'], '.3g')}{extra} | {rr} | "
                     f"{'yes' if t['ok'] else 'no'} |")
    lines += ["", "Medians after a warm-up; each round: the lowest and highest value the figure takes in a single "
              f"round, whose cases are timed side by side. sgemm: tile-shaped torch.bmm [256,{gemm['tile_k']}]×[{gemm['tile_k']},CH] "
              "(K = the scene's Gaussians per 16-px tile) in the same run. "
              "Stage columns in ms."]
    return "\n".join(lines) + "\n"


def plot_vs_D(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ds = [r["D"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(ds, [r["fwd_ms"] for r in rows], "o-", label="forward")
    ax.plot(ds, [r["fwd_bwd_ms"] for r in rows], "s-", label="forward + backward")
    ax.plot(ds, [r["stages_ms"]["raster_fwd"] for r in rows], "^--", label="raster_fwd stage")
    ax.set_xlabel("feature channels D (rendered with RGB + depth)")
    ax.set_ylabel("ms (median)")
    ax.set_title(f"{rows[0]['n_gaussians']:,} Gaussians at {rows[0]['size']}², CPU")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# two builds side by side (--ab)

AB_CHILD = r'''
import sys, json, importlib.util
root, bench, n, ds, runs, train = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
sys.path.insert(0, root)
import gsrender
assert gsrender.__file__.startswith(root), gsrender.__file__
spec = importlib.util.spec_from_file_location("cpu_render", bench)
cr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cr)
print(json.dumps(cr.target_cases(cr.random_box_scene(n, 512), ds, runs, 1, train=train)))
'''
AB_KEYS = ("fwd_ms", "outside_ms", "fwd_bwd_ms", "stages_ms.project", "stages_ms.sh", "stages_ms.bin",
           "stages_ms.raster_fwd", "pairs", "pairs_computed", "pairs_contributing")


def _ab_value(case: dict, key: str):
    if key == "outside_ms":
        return case["fwd_ms"] - sum(case["stages_ms"].values())
    a, _, b = key.partition(".")
    return case[a][b] if b else case[a]


def run_ab(base: str, new: str, rounds: int, runs: int, n: int, ds: list[int], train: bool) -> int:
    """Each build's medians over `rounds` alternating subprocesses, and base/new (see --ab)."""
    roots = {"base": str(Path(base).resolve()), "new": str(Path(new).resolve())}
    res: dict[str, list] = {k: [] for k in roots}
    for r in range(rounds):
        for name in (list(roots) if r % 2 == 0 else list(roots)[::-1]):
            out = subprocess.run([sys.executable, "-c", AB_CHILD, roots[name], str(Path(__file__).resolve()),
                                  str(n), json.dumps(ds), str(runs), "1" if train else "0"],
                                 capture_output=True, text=True)
            if out.returncode:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            res[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for i, d in enumerate(ds):
        for key in AB_KEYS:
            if key == "fwd_bwd_ms" and not train:
                continue
            m = {k: statistics.median(_ab_value(x[i], key) for x in v) for k, v in res.items()}
            print(f"D={d} {key}: base {m['base']:.1f}  new {m['new']:.1f}  base/new {m['base'] / m['new']:.2f}")
    return 0


# ---------------------------------------------------------------------------------------------
# every output, bit for bit (--dump, --compare)

DUMP_META = ("radii", "means2d", "depths", "conics", "opacities", "tile_offsets", "flatten_ids", "stats")
DUMP_PARAMS = ("means", "quats", "scales", "opacities", "sh")


def scene_outputs(n: int, grad: bool, size: int = 512) -> dict:
    """name → tensor for one render of the benchmark scene at n Gaussians (with gradients: grad)."""
    sc = random_box_scene(n, size)
    t = {k: sc[k].clone().requires_grad_(grad) for k in DUMP_PARAMS}
    feats = None
    if grad:
        feats = torch.rand(n, 8, generator=torch.Generator().manual_seed(1)).requires_grad_()
    with torch.set_grad_enabled(grad):
        o = gsrender.rasterize(*(t[k] for k in DUMP_PARAMS), sc["viewmat"], sc["K"], size, size,
                               sh_degree=3, features=feats, mode="sorted")
    res = {f"{n}.{k}": getattr(o, k).detach().clone()
           for k in ("colors", "depths", "alphas", "features") if getattr(o, k) is not None}
    res.update({f"{n}.meta.{k}": o.meta[k].detach().clone() for k in DUMP_META})
    if grad:
        (o.colors.sum() + o.alphas.sum() + o.depths.sum() + o.features.sum()).backward()
        res.update({f"{n}.grad.{k}": v.grad.clone() for k, v in t.items()})
        res[f"{n}.grad.features"] = feats.grad.clone()
    return res


def dump(path: str, n_fwd: int, n_grad: int) -> int:
    res = scene_outputs(n_fwd, False)
    res.update(scene_outputs(n_grad, True))
    torch.save(res, path)
    print(f"{len(res)} tensors -> {path}")
    return 0


def compare(a: str, b: str) -> int:
    x, y = torch.load(a), torch.load(b)
    differ = sorted(k for k in x.keys() | y.keys() if k not in x or k not in y or not torch.equal(x[k], y[k]))
    print(f"{len(x)} tensors; differ: {', '.join(differ) if differ else 'none'}")
    return 1 if differ else 0


# ---------------------------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller scenes, under 2 minutes")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds (tests; wins over --quick)")
    p.add_argument("--out", default=None, help="folder for cpu_render.json and cpu_render.md")
    p.add_argument("--mode", choices=("sorted", "weighted"), default="sorted")
    p.add_argument("--preset", default="counter", help="synthetic preset for the large scene")
    p.add_argument("--runs", type=int, default=None, help="timed runs per case (median)")
    p.add_argument("--targets", action="store_true", help="the benchmark scene and targets (see above)")
    p.add_argument("--no-subprocess", action="store_true", help="run the large group in this process")
    ab = p.add_argument_group("two builds side by side (--ab)")
    ab.add_argument("--ab", metavar="BASE", default=None, help="checkout of the baseline build")
    ab.add_argument("--new", default=str(ROOT), help="checkout under test (default: this one)")
    ab.add_argument("--rounds", type=int, default=2, help="subprocesses per build")
    ab.add_argument("--n", type=int, default=100_000, help="Gaussians")
    ab.add_argument("--D", default="0,64", help="feature widths, comma-separated")
    ab.add_argument("--no-train", action="store_true", help="forward only (no forward + backward)")
    outs = p.add_argument_group("every output, bit for bit (--dump, --compare)")
    outs.add_argument("--dump", metavar="FILE", default=None, help="save every output and gradient")
    outs.add_argument("--n-fwd", type=int, default=1_000_000, help="--dump: Gaussians of the forward")
    outs.add_argument("--n-grad", type=int, default=100_000, help="--dump: Gaussians of forward + backward")
    outs.add_argument("--compare", nargs=2, metavar=("A", "B"), default=None, help="compare two dumps")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:  # one scene group in a fresh process (its own peak memory)
        spec = json.loads(args.worker)
        rows = run_group(spec["scene"], spec["cfg"], Path(spec["cache"]))
        atomic.write_text(Path(args.worker_out), json.dumps(rows))
        return 0
    if args.dump:
        return dump(args.dump, args.n_fwd, args.n_grad)
    if args.compare:
        return compare(*args.compare)
    if args.ab:
        return run_ab(args.ab, args.new, args.rounds, args.runs or 3, args.n,
                      [int(d) for d in args.D.split(",")], not args.no_train)
    config = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.targets:
        return run_targets(config, args.runs or 5, Path(args.out) if args.out else None)
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
        atomic.write_text(out / "cpu_render.json", json.dumps({"env": env, "config": cfg, "sgemm_gflops": gemm,
                                                         "results": rows}, indent=1))
        (out / "cpu_render.md").write_text(markdown(rows, gemm, env))
        print(f"wrote {out / 'cpu_render.json'} and {out / 'cpu_render.md'}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
