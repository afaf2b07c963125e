"""The document renderer: runs the benchmarks behind the figures in README.md and docs/, keeps
each result in benchmarks/results/<name>.json with the machine it ran on (CPU model, the CPU
instruction-set copy in use, cores, threads, load average before and after), the commit and the
date, and renders the figure tables of the markdown files from those files.

    python tools/figures/report.py                 # every benchmark but the long ones, the gallery's
                                                   # pictures (scripts/gallery_images.py), then render
    python tools/figures/report.py --only cpu_targets,viewer
    python tools/figures/report.py --only distributed_check,kernel_mutants   # long ones (also first_run,
                                                   # voda_trained, voda_flips, loc_trained,
                                                   # loc_tuning, loc_real)
    python tools/figures/report.py --render        # render from benchmarks/results/ alone, no run
    python tools/figures/report.py --quick         # small configs into out/bench-quick/; renders
                                                   # into memory only: checks that every table renders

A long benchmark (tens of minutes, or a fresh clone's first run) runs only when --only names it;
`make bench` and --quick render its table from its results file. --quick also takes the results
file of a benchmark without a quick config instead of running it.

Each benchmark's own outputs (its JSON, markdown and plots) stay in out/<name>/, where
scripts/gallery_images.py finds the plots. A whole run (no --only, no --quick) writes each step's wall
time to results/bench_run.json.

A table lives between `<!-- figures:begin NAME -->` and `<!-- figures:end NAME -->` in a markdown
file; RENDERERS says which results file each one is made from. The first run and the application
studies record their own machine, commit and date (their renderers: tools/figures/study_figures.py,
doc_tables.first_run_lines); build_profile*.json come from `make build-profile`.

It lives in tools/figures/, not in benchmarks/: it measures nothing itself and only rewrites the
documents from what the benchmarks (benchmarks/) and the studies (studies/) recorded, as the other
developer tools in tools/ work on the project rather than measure it; doc_tables and study_figures
beside it turn one results file each into a table.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script: tools.figures and studies from this checkout
    sys.path.insert(0, str(ROOT))

from gsrender.bench.measure import machine
from gsrender.io import atomic
from gsrender.io.paths import data_dir
from tools.figures import doc_tables
from tools.figures.doc_tables import dash as _g
from tools.figures.doc_tables import load
from tools.figures.study_figures import RENDERERS as STUDY_RENDERERS

RESULTS = ROOT / "benchmarks" / "results"
DOCS = ("README.md", "docs/cpu.md", "docs/benchmarks.md", "docs/training.md", "docs/distributed.md",
        "docs/gallery.md", "docs/cuda_status.md", "docs/testing.md", "docs/cameras.md",
        "studies/voda/REPORT.md", "studies/loc/REPORT.md")
MARKER = re.compile(r"(<!-- figures:begin (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- figures:end (?P=name) -->)",
                    re.DOTALL)


@dataclass(frozen=True)
class Bench:
    """One benchmark: its command for the full and the quick config ({out} is its output folder)
    and the JSON file it writes there."""
    full: tuple[str, ...]
    quick: tuple[str, ...] | None  # None: --quick renders from its results file instead
    produces: str
    needs: tuple[str, ...] = ()  # paths relative to ROOT (or absolute) without which it is skipped
    long: bool = False  # run only when --only names it
    recorded: bool = False  # its JSON records its own machine, commit and date: kept as it is


SNOWMIKU = str(data_dir() / "snowmiku_small")
BENCHES = {
    "cpu_targets": Bench(("benchmarks/cpu_render.py", "--targets", "--runs", "5", "--out", "{out}"),
                         ("benchmarks/cpu_render.py", "--targets", "--smoke", "--runs", "2", "--out", "{out}"),
                         "cpu_targets.json"),
    "fps": Bench(("benchmarks/fps.py", "--quick", "--frames", "6", "--out", "{out}"),
                 ("benchmarks/fps.py", "--smoke", "--out", "{out}"), "fps.json"),
    "channels": Bench(("benchmarks/channels.py", "--quick", "--out", "{out}"),
                      ("benchmarks/channels.py", "--smoke", "--out", "{out}"), "channels.json"),
    "mipnerf360_synthetic": Bench(("benchmarks/mipnerf360.py", "--synthetic", "--quick", "--out", "{out}"),
                                  ("benchmarks/mipnerf360.py", "--synthetic", "--smoke", "--out", "{out}"),
                                  "results.json"),
    "viewer": Bench(("benchmarks/viewer.py", "--frames", "24", "--out", "{out}"),
                    ("benchmarks/viewer.py", "--frames", "3", "--width", "160", "--height", "120", "--out", "{out}"),
                    "viewer.json"),
    "train_step": Bench(("benchmarks/train_step.py", "--colmap", SNOWMIKU, "--steps", "10", "--out", "{out}"),
                        ("benchmarks/train_step.py", "--colmap", SNOWMIKU, "--warmup", "1", "--steps", "2",
                         "--out", "{out}"),
                        "train_step.json", needs=(SNOWMIKU,)),
    "camera_ut": Bench(("benchmarks/camera_ut_figure.py", "--out", "{out}", "--figure",
                        "docs/images/camera_ut.png"),
                       ("benchmarks/camera_ut_figure.py", "--size", "96", "--samples", "100000",
                        "--out", "{out}"), "camera_ut.json"),
    "train": Bench(("benchmarks/train.py", "--colmap", SNOWMIKU, "--no-progress", "--out", "{out}"),
                   ("benchmarks/train.py", "--colmap", SNOWMIKU, "--no-progress", "--steps", "4", "--scale", "0.25",
                    "--out", "{out}"),
                   "results.json", needs=(SNOWMIKU,)),
    "train_threads": Bench(("benchmarks/train_threads.py", "--colmap", SNOWMIKU, "--out", "{out}"),
                           None, "train_threads.json", needs=(SNOWMIKU,)),
    "distributed": Bench(("benchmarks/distributed_scaling.py", "--colmap", SNOWMIKU, "--out", "{out}"),
                         ("benchmarks/distributed_scaling.py", "--colmap", SNOWMIKU, "--rounds", "1", "--scale",
                          "0.25", "--steps", "1", "--out", "{out}"),
                         "distributed.json", needs=(SNOWMIKU,)),
    "distributed_check": Bench(("benchmarks/distributed_check.py", "--colmap", SNOWMIKU, "--out", "{out}"),
                               None, "distributed_check.json", needs=(SNOWMIKU,), long=True),
    "kernel_cases": Bench(("benchmarks/kernel_cases.py", "--out", "{out}"), None, "kernel_cases.json"),
    "kernel_mutants": Bench(("tools/kernel_mutants.py", "--json", "{out}/kernel_mutants.json"), None,
                            "kernel_mutants.json", needs=("build/kernel_cases",), long=True),
    # a fresh clone's `make demo` (run it on a quiet machine) and the application studies on
    # trained scenes (their evaluation seeds; about an hour in all on 2 idle cores)
    "first_run": Bench(("benchmarks/first_run.py", "--out", "{out}/first_run.json"), None, "first_run.json",
                       long=True, recorded=True),
    "voda_trained": Bench(("studies/voda/trained.py", "--splits", "isolated", "occluding", "--out", "{out}"),
                          None, "results.json", long=True, recorded=True),
    "voda_flips": Bench(("studies/voda/flips.py", "--out", "{out}", "2000", "2001"), None, "voda_flips.json",
                        long=True, recorded=True),
    "loc_trained": Bench(("studies/loc/trained.py", "--out", "{out}"), None, "loc_trained.json",
                         long=True, recorded=True),
    "loc_tuning": Bench(("studies/loc/trained.py", "--seeds", "0", "1", "--out", "{out}"), None,
                        "loc_trained.json", long=True, recorded=True),
    # SplitGS-Loc on the real bonsai model that `make bench-real` trains (about an hour on 2 cores)
    "loc_real": Bench(("studies/loc/real.py", "--json", "{out}/loc_real.json"), None, "loc_real.json",
                      needs=("out/bench_real/model/bonsai/point_cloud/iteration_7000",), long=True,
                      recorded=True),
}


# ---------------------------------------------------------------------------------------------
# the machine


def _commit() -> str:
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()
    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    # what this script itself rewrites (results files, the figure blocks, the gallery's pictures)
    # does not make the measured tree dirty
    written = [f":(exclude){p}" for p in ("benchmarks/results", "docs/images", *DOCS)]
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no", "--", ".", *written) else "")


def run_bench(name: str, quick: bool, results: Path, out: Path) -> Path | None:
    """Runs one benchmark in a fresh process with its outputs (JSON, markdown, plots) in
    out/<name>, wraps its JSON with the machine and writes results/<name>.json. None when its
    inputs are missing or it fails."""
    b = BENCHES[name]
    if quick and b.quick is None:  # its table renders from the committed results file
        if (RESULTS / f"{name}.json").is_file() and results != RESULTS:
            results.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(RESULTS / f"{name}.json", results / f"{name}.json")
        print(f"{name}: no quick config; its results file is rendered", file=sys.stderr)
        return results / f"{name}.json"
    missing = [p for p in b.needs if not (ROOT / p).exists()]
    if missing:
        print(f"{name}: skipped ({', '.join(missing)} missing)", file=sys.stderr)
        return None
    folder = out / name
    cmd = [sys.executable, *(a.replace("{out}", str(folder)) for a in (b.quick if quick else b.full))]
    shown = " ".join(a.replace(str(folder), "OUT").replace(str(ROOT.parent), "..") for a in cmd[1:])
    print(f"{name}: {shown}", file=sys.stderr, flush=True)
    before = machine()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if proc.returncode:
        print(f"{name}: failed (exit {proc.returncode}); its results file is left as it was", file=sys.stderr)
        return None
    if b.recorded:
        results.mkdir(parents=True, exist_ok=True)
        path = Path(shutil.copyfile(folder / b.produces, results / f"{name}.json"))
    else:
        path = write_result(results, name, "quick" if quick else "full", f"python {shown}", before, wall,
                            json.loads((folder / b.produces).read_text()))
    print(f"{name}: {wall:.0f} s, wrote {path}", file=sys.stderr, flush=True)
    return path


def run_gallery() -> tuple[float, bool]:
    """scripts/gallery_images.py (docs/images/ from the benchmarks' plots, the plant turntable, the
    viewer screenshot) -> (its wall seconds, whether it succeeded)."""
    print("gallery images: scripts/gallery_images.py", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "scripts/gallery_images.py"], cwd=ROOT, check=False)
    if proc.returncode:
        print(f"gallery images: failed (exit {proc.returncode})", file=sys.stderr)
    return round(time.perf_counter() - t0, 1), proc.returncode == 0


def write_result(results: Path, name: str, config: str, command: str, before: dict, wall: float,
                 result: dict) -> Path:
    """results/<name>.json: result with the machine and load before and after, commit, date, wall time."""
    res = {"name": name, "config": config, "command": command, "machine": before,
           "loadavg_after": machine()["loadavg"], "commit": _commit(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "wall_s": round(wall, 1),
           "result": result}
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    atomic.write_text(path, json.dumps(res, indent=1) + "\n")
    return path


# ---------------------------------------------------------------------------------------------
# rendering


def _where(r: dict) -> str:
    """The machine, load, commit and date of one results file, as a table cell."""
    m = r["machine"]
    load = str((m.get("loadavg") or ["?"])[0])
    if r.get("loadavg_after"):
        load += f"→{r['loadavg_after'][0]}"
    return (f"{m.get('cpu') or '?'}, {m.get('isa', '?')} copy, {m.get('threads', '?')} threads of "
            f"{m.get('cores', '?')} cores, load {load}; {r.get('commit', '?')}, {r.get('date', '?')}")


def _targets(r: dict) -> dict[str, dict]:
    return {t["target"]: t for t in r["result"]["targets"]}


def _target_rows(r: dict) -> list[tuple[str, str, str]]:
    """(figure, goal, value) of each CPU target, the value with its range over the rounds."""
    rows = []
    for t in r["result"]["targets"]:
        if "GFLOP" in t.get("target", "") or t.get("gflops") is not None:
            value = f"{_g(t['value'], '.2f')} ({_g(t['gflops'], '.0f')} of {_g(t['sgemm'], '.0f')} GFLOP/s)"
        elif t["target"].endswith("MB"):
            value = _g(t["value"], ".0f")
        else:
            fmt = ".1f" if t["target"].endswith("ms") else ".2f"
            value = _g(t["value"], fmt)
            if t.get("range"):
                value += f" [{t['range'][0]:{fmt}}–{t['range'][1]:{fmt}}]"
        rows.append((t["target"], t["goal"], value))
    return rows


def render_readme(results: Path) -> str:
    lines = ["| figure | value | benchmark (results file) |", "|---|---|---|"]
    wheres = []

    def cite(r: dict, name: str) -> str:
        if _where(r) not in wheres:
            wheres.append(_where(r))
        how = f"`{r['command'].split()[1]}`, " if "command" in r else ""
        return f"{how}{name}.json, run {wheres.index(_where(r)) + 1}"

    if (r := load(results, "cpu_targets")) is not None:
        for figure, goal, value in _target_rows(r):
            if "accumulation" in figure:  # docs/cpu.md has them, with their sgemm reference
                continue
            lines.append(f"| CPU: {figure} (goal {goal}) | {value} | {cite(r, 'cpu_targets')} |")
    if (r := load(results, "train_step")) is not None:
        res = r["result"]
        lines.append(f"| CPU training step, snowmiku_small ({res['gaussians']:,} Gaussians, "
                     f"{res['image'][0]}×{res['image'][1]}), wall / CPU ms | {res['whole_step']['wall_ms']:.0f} / "
                     f"{res['whole_step']['cpu_ms']:.0f} | {cite(r, 'train_step')} |")
    if (r := load(results, "viewer")) is not None:
        res = r["result"]
        f = res["full"]
        lines.append(f"| viewer frame, {res['n_gaussians']:,} Gaussians at {f['width']}×{f['height']}: wall / "
                     f"CPU ms | {f['frame_ms_median']:.0f} / {f['cpu_ms_median']:.0f} | {cite(r, 'viewer')} |")
    if (r := load(results, "real_bonsai")) is not None:
        res, tr = r["result"], r["result"]["train"]
        ev = res["eval"]
        lines.append(f"| bonsai from its 292 photos (SfM, `--preset 3dgs`, {tr['steps']:,} steps in "
                     f"{tr['wall_seconds'] / 60:.0f} min), held-out PSNR dB / SSIM at {ev['width']}×{ev['height']} "
                     f"(Mip-Splatting, 30k steps at 1559×1039: 32.18 / 0.941) | {ev['psnr']:.2f} / {ev['ssim']:.3f} | "
                     f"`scripts/bench_real.sh`, {cite(r, 'real_bonsai').split(', ', 1)[-1]} |")
        for path in real_budgets(results):
            r = json.loads(path.read_text())
            ev = r["result"]["eval"]
            lines.append(f"| the same run resumed to {r['result']['train']['steps']:,} steps: held-out "
                         f"PSNR dB / SSIM | {ev['psnr']:.2f} / {ev['ssim']:.3f} | "
                         f"{cite(r, path.stem).split(', ', 1)[-1]} |")
    if (r := load(results, "first_run")) is not None:
        lines.append(f"| fresh clone → `make demo`'s first image, s | {r['demo_first_image_s']:.0f} | "
                     f"{cite(r, 'first_run')} |")
        lines.append(f"| `make demo`'s CPU build: s, peak RSS GB | {r['build_cpu_s']:.0f}, {r['build_peak_rss_gb']:.1f} | "
                     f"{cite(r, 'first_run')} |")
    lines.append("")
    lines += [f"Run {i + 1}: {w}." for i, w in enumerate(wheres)]
    return "\n".join(lines) + "\n"


def _cpu_target_lines(r: dict) -> list[str]:
    res = r["result"]
    lines = ["| N | D | forward ms | fwd + bwd ms | project | sh | bin | raster_fwd | pairs | contributing lanes |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in [*res["cases"], res["big"]]:
        st = c["stages_ms"]
        lines.append(f"| {c['n_gaussians']:,} | {c['D']} | {c['fwd_ms']:.1f} | {_g(c.get('fwd_bwd_ms'), '.1f')} | "
                     f"{st['project']:.1f} | {st['sh']:.1f} | {st['bin']:.1f} | {st['raster_fwd']:.1f} | "
                     f"{c['pairs']:,} | {c['pairs_contributing']:,} |")
    lines += ["", "| target | goal | median [range over rounds] | met |", "|---|---|---|---|"]
    ok = {t["target"]: t["ok"] for t in res["targets"]}
    return lines + [f"| {f} | {g} | {v} | {'yes' if ok[f] else 'no'} |" for f, g, v in _target_rows(r)]


def _fps_lines(r: dict) -> list[str]:
    by = {}
    for x in r["result"]["runs"]:
        by.setdefault((x["n_gaussians"], x["D"]), {})[x["kernel"]] = x

    def cell(x: dict, key: str, fmt: str) -> str:
        return _g(x.get("fps") if key == "fps" else x.get("stages_ms", {}).get(key), fmt)

    lines = [("| N | D | matrix fps | scalar fps | matrix raster_fwd ms | scalar raster_fwd ms | "
              "matrix raster_bwd ms | scalar raster_bwd ms |"), "|---|---|---|---|---|---|---|---|"]
    for (n, d), k in sorted(by.items()):
        m, sc = k.get("matrix", {}), k.get("scalar", {})
        lines.append(f"| {n:,} | {d} | {cell(m, 'fps', '.1f')} | {cell(sc, 'fps', '.1f')} | "
                     f"{cell(m, 'raster_fwd', '.0f')} | {cell(sc, 'raster_fwd', '.0f')} | "
                     f"{cell(m, 'raster_bwd', '.0f')} | {cell(sc, 'raster_bwd', '.0f')} |")
    return lines


def _channels_lines(r: dict) -> list[str]:
    res = r["result"]
    cells = {(x["method"], x["D"]): f"{x['fwd_ms']:.0f} / {x['bwd_ms']:.0f}" for x in res["runs"]}
    lines = [f"{res['n_gaussians']:,} Gaussians at {res['width']}×{res['height']}, forward / backward ms:", "",
             "| D | matrix | scalar | chunked (32 per call) |", "|---|---|---|---|"]
    return lines + [f"| {d} | {cells.get(('matrix', d), '–')} | {cells.get(('scalar', d), '–')} | "
                    f"{cells.get(('chunked', d), '–')} |" for d in res["D"]]


def _mipnerf360_lines(r: dict) -> list[str]:
    lines = ["| scenes | FPS | PSNR (float32 matrix path vs float64 scalar kernel), dB | SSIM |", "|---|---|---|---|"]
    for group, m in r["result"]["means"].items():
        lines.append(f"| {group} | {_g(m.get('fps'), '.1f')} | {_g(m.get('psnr'), '.0f')} | {_g(m.get('ssim'), '.4f')} |")
    return lines


def _camera_ut_lines(r: dict) -> list[str]:
    res = r["result"]
    lines = [(f"{len(res['gaussians'])} Gaussians, {res['size']}² px, "
             f"{res['samples_per_gaussian']:,} Monte-Carlo samples each; means over the Gaussians:"),
             "", "| lens | method | L1 vs Monte Carlo | mean error, px | covariance error |",
             "|---|---|---|---|---|"]
    for e in res["lenses"]:
        for method, m in e["methods"].items():
            lines.append(f"| {e['lens']} | {method} | {m['l1_mean']:.3f} | {m['mean_error_px']:.2f} | "
                         f"{100 * m['cov_rel_error']:.1f}% |")
        lines.append(f"| {e['lens']} | Monte Carlo (a second run) | "
                     f"{e['monte_carlo_noise_l1_mean']:.3f} | | |")
    return lines


def _table(name: str, lines_of):
    """A renderer: the table lines_of makes from results/<name>.json, then the command and machine."""
    def render(results: Path) -> str:
        r = load(results, name)
        if r is None:
            how = f"python tools/figures/report.py --only {name}" if name in BENCHES else "make bench"
            return f"(no results file: `{how}`)\n"
        return "\n".join([*lines_of(r), "", f"`{r['command']}`: {_where(r)}."]) + "\n"
    return render


def render_build_profile(results: Path) -> str:
    """docs/testing.md's build cost per translation unit: two runs of tools/build_profile.py,
    build_profile_torch_kernels.json (a tree whose backward, contributors, SH and SSIM kernels
    include the torch headers) and build_profile.json (this tree's torch-free kernel files), side by
    side: each unit's wall and CPU seconds and peak compiler memory. A kernel file sits under the
    op it was split from."""
    runs = [load(results, name) for name in ("build_profile_torch_kernels", "build_profile")]
    if None in runs:
        return "(no results file: `make build-profile`, see above)\n"
    by_unit = [{u["unit"]: u for u in r["units"]} for r in runs]
    group = lambda unit: unit.replace("_kernel.cpp", ".cpp")
    cost: dict[str, float] = {}
    for units in by_unit:
        for unit, u in units.items():
            cost[group(unit)] = max(cost.get(group(unit), 0.0), u["cpu_s"])
    order = sorted(set(by_unit[0]) | set(by_unit[1]), key=lambda u: (-cost[group(u)], group(u), u))

    def cells(u: dict | None) -> str:
        return " — | — | — |" if u is None else f" {u['wall_s']:.1f} | {u['cpu_s']:.1f} | {u['peak_rss_mb']:.0f} |"

    lines = ["| translation unit | torch in kernels: wall s | CPU s | peak MB | torch-free kernels: wall s | CPU s | peak MB |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| `{u}` |" + cells(by_unit[0].get(u)) + cells(by_unit[1].get(u)) for u in order]
    # a whole build's totals; a run read from compile records (--log) may hold some units only
    totals = [" — | — | — |" if "from_log" in r else
              f" {r['build_wall_s']:.1f} | {sum(u['cpu_s'] for u in r['units']):.1f} | "
              f"{max(u['peak_rss_mb'] for u in r['units']):.0f} |" for r in runs]
    lines.append("| whole build (wall; CPU sum; largest peak) |" + "".join(totals))
    lines.append("")
    for label, r in zip(("torch in kernels", "torch-free kernels"), runs):
        top = max(r["units"], key=lambda u: u["peak_rss_mb"])
        how = ("the units listed, compiled one at a time through `tools/timed_cxx.py` (`tools/build_profile.py "
               "--log`; a dash: not compiled in this run)" if "from_log" in r else
               f"a whole build, MAX_JOBS={r['jobs']}")
        start = r["load_avg_start"][0] if r.get("load_avg_start") else "?"
        lines.append(f"- {label}: {r.get('commit', '?')}, `GSRENDER_CPU_ISA_BUILD={r['isa_build']}`, {how}; "
                     f"{r.get('cpu_model', '?')}, {r.get('cores', '?')} cores, load average {start}→"
                     f"{r['load_avg_end'][0]}; {r.get('date', '?')}; largest peak "
                     f"{top['peak_rss_mb'] / 1024:.2f} GB (`{top['unit']}`)" + (f"; {r['note']}" if r.get("note") else ""))
    return "\n".join(lines) + "\n"


def _bench_run_lines(r: dict) -> list[str]:
    res = r["result"]
    lines = ["| step | wall s |", "|---|---:|"]
    lines += [f"| {name}{' (no new result)' if name in res['failed'] else ''} | {s:.0f} |"
              for name, s in res["walls_s"].items()]
    return lines + [f"| **all of `make bench`** | **{res['total_s']:.0f}** ({res['total_s'] / 60:.1f} min) |"]


def render_first_run(results: Path) -> str:
    r = load(results, "first_run")
    if r is None:
        return "(no results file: `python benchmarks/first_run.py` on a quiet machine writes it)\n"
    return "\n".join(doc_tables.first_run_lines(r)) + "\n"


def real_budgets(results: Path) -> list[Path]:
    """The real scene's records of another step budget (real_bonsai_30000.json: the 7k run
    resumed to its end), not one-factor changes."""
    return sorted((p for p in results.glob("real_bonsai_*.json") if p.stem.rsplit("_", 1)[1].isdigit()),
                  key=lambda p: int(p.stem.rsplit("_", 1)[1]))


def render_real_bonsai(results: Path) -> str:
    """docs/benchmarks.md: the 7k record (doc_tables.real_scene_lines) with a row for each longer
    budget it was resumed to."""
    rec = load(results, "real_bonsai")
    if rec is None:
        return "(no results file: `make bench-real`)\n"
    longer = [(p.name, json.loads(p.read_text())) for p in real_budgets(results)]
    where = [f"`{rec['command']}`: {_where(rec)}."] + [
        f"{name}: `{r['command']}`: {_where(r)}." for name, r in longer]
    return "\n".join([*doc_tables.real_scene_lines(rec, [r for _, r in longer]), "", *where]) + "\n"


def render_real_factors(results: Path) -> str:
    """The real scene's one-factor rows: `make bench-real` as it is, then each record of a run
    that changed one factor (real_bonsai_*.json, its `one_factor` says which)."""
    main_rec = load(results, "real_bonsai")
    if main_rec is None:
        return "(no results file: `make bench-real`)\n"
    recs = [("`--preset 3dgs` (screen-size pruning off)", main_rec)]
    paths = [p for p in sorted(results.glob("real_bonsai_*.json")) if p not in real_budgets(results)]
    for path in paths:
        rec = json.loads(path.read_text())
        recs.append((rec["one_factor"].split(":")[0], rec))
    notes = [f"{path.name}: {json.loads(path.read_text())['one_factor']}." for path in paths]
    return "\n".join([*doc_tables.real_factor_lines(recs), "", *notes]) + "\n"


def _result(lines_of):
    """lines_of(the benchmark's own JSON), for _table."""
    return lambda r: lines_of(r["result"])


RENDERERS = {"readme": render_readme, "cpu_targets": _table("cpu_targets", _cpu_target_lines),
             "fps": _table("fps", _fps_lines), "channels": _table("channels", _channels_lines),
             "mipnerf360": _table("mipnerf360_synthetic", _mipnerf360_lines),
             "train": _table("train", _result(doc_tables.train_lines)),
             "train_step": _table("train_step", _result(doc_tables.train_step_lines)),
             "train_threads": _table("train_threads", _result(doc_tables.train_threads_lines)),
             "distributed": _table("distributed", _result(doc_tables.distributed_lines)),
             "distributed_check": _table("distributed_check", _result(doc_tables.distributed_check_lines)),
             "viewer": _table("viewer", _result(doc_tables.viewer_lines)),
             "first_run": render_first_run,
             "kernel_cases": _table("kernel_cases", _result(doc_tables.kernel_cases_lines)),
             "kernel_mutants": _table("kernel_mutants", _result(doc_tables.kernel_mutants_lines)),
             "camera_ut": _table("camera_ut", _camera_ut_lines), "build_profile": render_build_profile,
             "bench_run": _table("bench_run", _bench_run_lines),
             # a real scene from photos: `make bench-real` (scripts/bench_real.sh) writes it
             "real_bonsai": render_real_bonsai,
             "real_bonsai_factors": render_real_factors,
             **STUDY_RENDERERS}


def render_text(text: str, results: Path) -> str:
    """text with every figures block replaced by its rendering from results."""
    def sub(m: re.Match) -> str:
        name = m["name"]
        if name not in RENDERERS:
            raise ValueError(f"figures block {name!r}: no renderer (known: {sorted(RENDERERS)})")
        return m.group(1) + RENDERERS[name](results) + m.group(4)
    return MARKER.sub(sub, text)


def blocks(text: str) -> dict[str, str]:
    return {m["name"]: m["body"] for m in MARKER.finditer(text)}


def render_docs(results: Path, write: bool) -> list[str]:
    """Renders every figures block of DOCS; writes the files when asked. Returns the files that changed."""
    changed = []
    for rel in DOCS:
        path = ROOT / rel
        old = path.read_text()
        new = render_text(old, results)
        if new != old:
            changed.append(rel)
            if write:
                path.write_text(new)
    return changed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small configs; results into out/bench-quick, markdown untouched")
    p.add_argument("--only", default=None, help=f"comma-separated subset of {', '.join(BENCHES)}")
    p.add_argument("--render", action="store_true", help="no run: render the markdown from the results files")
    p.add_argument("--results", default=None, help="results folder (default benchmarks/results, --quick out/bench-quick)")
    a = p.parse_args(argv)
    out = ROOT / "out" / ("bench-quick" if a.quick else "")
    results = Path(a.results) if a.results else out if a.quick else RESULTS
    names = a.only.split(",") if a.only else [n for n, b in BENCHES.items() if not b.long or a.quick]
    unknown = set(names) - set(BENCHES)
    if unknown:
        p.error(f"--only: unknown {sorted(unknown)}")
    if not a.render:
        start, t0 = machine(), time.perf_counter()
        walls, failed = {}, []
        for name in names:
            t = time.perf_counter()
            if run_bench(name, a.quick, results, out) is None:
                failed.append(name)
            walls[name] = round(time.perf_counter() - t, 1)
        if not a.quick and a.only is None:  # the whole figure set: the gallery's pictures too, then the timing
            walls["gallery images"], drawn = run_gallery()
            if not drawn:
                failed.append("gallery images")
            total = time.perf_counter() - t0  # bench_run.json: each step's wall seconds, the whole run's
            write_result(results, "bench_run", "full", "python tools/figures/report.py", start, total,
                         {"walls_s": walls, "failed": failed, "total_s": round(total, 1)})
        print(f"benchmarks: {time.perf_counter() - t0:.0f} s; without a new result: {', '.join(failed) or 'none'}",
              file=sys.stderr)
    changed = render_docs(results, write=not a.quick)
    print(("would change (quick: not written): " if a.quick else "rendered: ") + (", ".join(changed) or "nothing"),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
