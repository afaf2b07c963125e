"""The figure tables of docs/training.md, docs/distributed.md, docs/gallery.md and docs/cuda_status.md,
each made from one results file's `result` (tools/figures/report.py wraps them with the command and
the machine, and puts them between their markers)."""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path


def load(results: Path, name: str) -> dict | None:
    """results/<name>.json, or None when the benchmark has not written it."""
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def dash(v, fmt: str) -> str:
    """v formatted, or an en dash for a missing value."""
    return "–" if v is None else format(v, fmt)


def _span(vals: list[float], fmt: str) -> str:
    """The values of a figure over a benchmark's rounds, in run order."""
    return ", ".join(format(v, fmt) for v in vals)


# ---------------------------------------------------------------------------------------------
# training


def train_lines(res: dict) -> list[str]:
    """`gsrender train`'s results.json: one run's speed and quality."""
    w, h = res["image_size"]
    return [("| views (train / held out) | image | steps | s / step | CPU s / step | Gaussians at start → end | "
            "train / held-out PSNR (dB) | held-out SSIM |"), "|---|---|---|---|---|---|---|---|",
            (f"| {len(res['views']['train'])} / {len(res['views']['test'])} | {w}×{h} | {res['steps']} | "
            f"{res['seconds_per_step']:.3f} | {res['cpu_seconds'] / max(res['steps'], 1):.3f} | "
            f"{res['gaussians_initial']:,} → {res['gaussians_final']:,} | {dash(res['train']['psnr'], '.2f')} / "
            f"{dash(res['test']['psnr'], '.2f')} | {dash(res['test']['ssim'], '.3f')} |")]


def train_step_lines(res: dict) -> list[str]:
    """benchmarks/train_step.py: a step by phase, whole steps, and the SSIM / Adam comparisons."""
    st = res["step_ms"]
    w, h = res["image"]
    whole = res["whole_step"]
    return [f"{res['gaussians']:,} Gaussians, {w}×{h}, ms (medians):", "",
            "| render | loss | backward | densification statistics | Adam | sum | whole step: wall / CPU |",
            "|---|---|---|---|---|---|---|",
            (f"| {st['render']:.1f} | {st['loss']:.1f} | {st['backward']:.1f} | {st['stats']:.1f} | {st['adam']:.1f} | "
            f"{res['step_total_ms']:.1f} | {whole['wall_ms']:.1f} / {whole['cpu_ms']:.1f} |"), "",
            "| on the step's images and parameters | ms | other form, ms | speed-up |", "|---|---|---|---|",
            (f"| SSIM forward + backward: the fused kernel vs F.conv2d + tensor ops | "
            f"{res['ssim_kernel_fwd_bwd_ms']:.1f} | {res['ssim_tensor_ops_fwd_bwd_ms']:.1f} | "
            f"{res['ssim_speedup']:.2f}× |"),
            (f"| Adam step: foreach (the trainer's) vs fused | {res['adam_foreach_ms']:.1f} | "
            f"{res['adam_fused_ms']:.1f} | fused {res['adam_speedup']:.2f}× |")]


def train_threads_lines(res: dict) -> list[str]:
    """benchmarks/train_threads.py: whole steps per wait policy / thread count, per round."""
    loads = [r["loadavg"][0] for runs in res["settings"].values() for r in runs if r.get("loadavg")]
    head = (f"| {res['rounds']} rounds, load average {min(loads):.1f}–{max(loads):.1f} | CPU ms / step | "
            "wall ms / step |") if loads else "| setting | CPU ms / step | wall ms / step |"
    lines = [head, "|---|---|---|"]
    for name, runs in res["settings"].items():
        lines.append(f"| {name} | {_span([r['cpu_ms'] for r in runs], '.0f')} | "
                     f"{_span([r['wall_ms'] for r in runs], '.0f')} |")
    return lines


# ---------------------------------------------------------------------------------------------
# distributed


def distributed_lines(res: dict) -> list[str]:
    """benchmarks/distributed_scaling.py: per rank count, its runs in order, and the single-process
    kernel times of one rank's shard."""
    by = {}
    for r in res["runs"]:
        by.setdefault(r["ranks"], []).append(r)
    lines = [("| ranks | s / step (slowest rank) | views / step | views / s | exchange bytes / rank / step "
             "(rows) | transport alone (gloo, loopback) |"), "|---|---|---|---|---|---|"]
    for ranks, runs in sorted(by.items()):
        mb = [statistics.mean(r["bytes_per_step_per_rank"]) / 1e6 for r in runs]
        rows = [statistics.mean(r["rows_sent_per_rank"]) for r in runs]
        lines.append(f"| {ranks} | {_span([r['step_s_max'] for r in runs], '.2f')} | {ranks} | "
                     f"{_span([ranks / r['step_s_max'] for r in runs], '.2f')} | {_span(mb, '.2f')} MB "
                     f"({_span(rows, ',.0f')} rows) | {_span([1e3 * r['transport_s_max'] for r in runs], '.1f')} ms |")
    one = by.get(1, [])
    if one:
        kernels = [r["one_process_kernels_ms_this_rank_shard"] for r in one]
        names = [k for k in ("project", "sh", "bin", "raster_fwd", "backward_total") if k in kernels[0]]
        lines += ["", f"Kernel times of one single-process render of the 1-rank shard "
                      f"({one[0]['gaussians']:,} Gaussians, {one[0]['image'][0]}×{one[0]['image'][1]}; profile=True, "
                      "median of 3, ms, per run): "
                  + "; ".join(f"{k.replace('_total', '')} {_span([kk[k] for kk in kernels], '.0f')}" for k in names)
                  + "."]
    if 1 in by and 2 in by and len(by[1]) == len(by[2]):
        gain = [2 * a["step_s_max"] / b["step_s_max"] for a, b in zip(by[1], by[2])]
        lines += ["", f"Two ranks render {_span(gain, '.2f')}× the views per second of one (per round; 2× ideal)."]
    return lines


def _mean_ci(vals: list[float], fmt: str) -> str:
    from gsrender.bench.measure import mean_ci95

    m, h = mean_ci95(vals)
    return f"{m:{fmt}} ± {h:{fmt.lstrip('+')}}"


def distributed_check_lines(res: dict) -> list[str]:
    """benchmarks/distributed_check.py: the three kinds of run over the seeds, then the paired
    differences of the 2-rank run from each single-process one."""
    steps = res["steps"]
    label = {"two_ranks": f"2 ranks, `--steps {steps}`",
             "batch2": f"1 process, `--steps {steps} --batch-views 2`", "one": f"1 process, `--steps {steps}`"}
    lines = [("| run | optimiser steps × views | held-out PSNR (dB), per seed | held-out SSIM | "
             "training-view PSNR (dB) | Gaussians (end) | wall s |"), "|---|---|---|---|---|---|---|"]
    runs = res["runs"]
    for kind, rs in runs.items():
        g = [r["gaussians"] for r in rs]
        wall = [r["wall_s"] for r in rs]
        lines.append(f"| {label[kind]} | {rs[0]['steps']} × {rs[0]['views_per_step']} | "
                     f"{_mean_ci([r['test_psnr'] for r in rs], '.2f')} ({_span([r['test_psnr'] for r in rs], '.3f')}) | "
                     f"{_mean_ci([r['test_ssim'] for r in rs], '.3f')} | "
                     f"{_mean_ci([r['train_psnr'] for r in rs], '.2f')} | {min(g):,}–{max(g):,} | "
                     f"{min(wall):.0f}–{max(wall):.0f} |")
    lines += ["", (f"Mean ± 95 % interval (t, {len(res['seeds']) - 1} degrees of freedom) over seeds "
                  f"{', '.join(map(str, res['seeds']))}. Differences in PSNR, 2 ranks minus the other run, paired by seed:"), ""]
    two = runs["two_ranks"]
    for kind, name in (("batch2", "(b) 2 ranks − 1 process with `--batch-views 2`"),
                       ("one", "(a) 2 ranks − 1 process with one view a step")):
        d = [a["test_psnr"] - b["test_psnr"] for a, b in zip(two, runs[kind])]
        dt = [a["train_psnr"] - b["train_psnr"] for a, b in zip(two, runs[kind])]
        same = sum(a["gaussians"] == b["gaussians"] for a, b in zip(two, runs[kind]))
        fmt = ".4f" if kind == "batch2" else ".2f"
        lines.append(f"- **{name}: {_mean_ci(d, '+' + fmt)} dB** held out ({_span(d, '+' + fmt)}); training views "
                     f"{_mean_ci(dt, '+' + fmt)} dB; the same final Gaussian count in {same} of {len(d)} seeds.")
    ply = [p for p in res["ply_two_ranks_vs_batch2"] if p.get("same_count")]
    if ply:
        lines.append(f"- Final PLYs of (b), Gaussian by Gaussian (both in one process's order): largest position "
                     f"difference {max(p['max_position'] for p in ply):.2g}, opacity "
                     f"{max(p['max_opacity'] for p in ply):.2g} ({len(ply)} seeds).")
    return lines


# ---------------------------------------------------------------------------------------------
# gallery


def viewer_lines(res: dict) -> list[str]:
    """benchmarks/viewer.py: the still and the moving frame."""
    lines = [f"{res['n_gaussians']:,} Gaussians:", "",
             "| frame | wall ms, median (render + JPEG/send) | p90 wall ms | CPU ms (all threads) | FPS |",
             "|---|---|---|---|---|"]
    for key, name in (("full", "still"), ("moving", "moving")):
        f = res.get(key)
        if f:
            lines.append(f"| {name}, {f['width']}×{f['height']} ({f['frames']} frames) | {f['frame_ms_median']:.0f} "
                         f"({f['render_ms_median']:.0f} + {f['send_ms_median']:.0f}) | {f['frame_ms_p90']:.0f} | "
                         f"{f['cpu_ms_median']:.0f} | {f['fps_median']:.1f} |")
    return lines


# ---------------------------------------------------------------------------------------------
# CUDA kernels' mutation score


def _basename_chain(chain: str) -> str:
    frames = [f.rsplit("/", 1)[-1] for f in chain.split(" <- ")]
    return " <- ".join(f for f in frames if not f.startswith("ptx.cuh")) or frames[0]


def _evidence(kill: str) -> str:
    """One build's report on a mutant, condensed to a table cell."""
    build, _, text = kill.partition(" build: ")
    if m := re.search(r"(\d+) failed, \d+ skipped of (\d+); first: FAIL ([^;]+)", text):
        return f"{'cases' if build == 'plain' else build + ' build cases'}: {m[1]}/{m[2]} fail ({m[3]})"
    if m := re.search(r"racecheck: (\w+) / (\w+) hazard on (\w+) memory", text):
        chains = re.findall(r" at ((?:[\w./]+:\d+(?: <- )?)+)", text)
        sync = re.search(r"no (__\w+) between", text)
        return (f"race: {m[1]} / {m[2]} ({m[3]}) " + " / ".join(_basename_chain(c) for c in chains)
                + (f", no {sync[1]}" if sync else ""))
    if m := re.search(r"AddressSanitizer: ([\w-]+)", text):
        return f"ASan: {m[1]}"
    return f"{build} build: {text[:140]}"


def kernel_mutants_lines(res: dict) -> list[str]:
    """tools/kernel_mutants.py --json: the score, then each mutant and what killed it."""
    n = len(res["mutants"])
    lines = [(f"**{res['killed']} of {n} mutants killed** against {res['n_cases']} cases of `make_cases`; "
             f"{res['total_s']:.0f} s wall in all (the unmutated baseline {res['baseline_s']:.0f} s)."), "",
             "| mutant | file | killed by |", "|---|---|---|"]
    for m in res["mutants"]:
        why = "; ".join(_evidence(k) for k in m["killed_by"]) or "**survived**"
        lines.append(f"| `{m['name']}` | `{m['path'].rsplit('/', 1)[-1]}` | {why.replace('|', '/')} |")
    return lines


def kernel_cases_lines(res: dict) -> list[str]:
    """benchmarks/kernel_cases.py: the set, the SIMT driver's CPU time per scene, the checker's
    verdict and the headroom its bars leave per precision."""
    mc = res["make_cases"]
    lines = [(f"{res['n_cases']} cases, {res['size_mb']:.0f} MB, longest tile list {res['longest_list']:,} entries; "
             f"`make_cases` {mc['wall_s']:.0f} s wall. The checker: {res['check_summary']}."), "",
             "| scene | cases | SIMT driver CPU s | wall s |", "|---|---|---|---|"]
    lines += [f"| {name} | {s['cases']} | {s['cpu_s']:.1f} | {s['wall_s']:.1f} |" for name, s in res["scenes"].items()]
    metric = {"value": "value error", "value_share": "share of elements past the value bound",
              "value_max": "value error where a share may pass the bound",
              "grad": "gradient 1 − cos, whole array", "grad_part": "gradient 1 − cos, worst part"}
    lines += ["", "| precision | measure | worst over the set (case: array) | the checker's bar |", "|---|---|---|---|"]
    for key, w in res["headroom"].items():
        prec, m = key.split("/")
        lines.append(f"| {prec} | {metric[m]} | {w['value']:.1e} ({w['case']}) | {w['bar']:.0e} |")
    return lines


def first_run_lines(r: dict) -> list[str]:
    """benchmarks/first_run.py's own file (not run by report.py): a fresh clone's `make demo`."""
    m = r["machine"]
    return ["| first image s | whole `make demo` s | its CPU s | build CPU s | build's largest compiler GB | venv GB |",
            "|---|---|---|---|---|---|",
            (f"| {r['demo_first_image_s']:.0f} | {r['demo_total_s']:.0f} | {r['command_cpu_s']:.0f} | "
            f"{r['build_cpu_s']:.0f} | {r['build_peak_rss_gb']:.2f} | {dash(r.get('venv_gb'), '.2f')} |"), "",
            f"`python benchmarks/first_run.py`: {m.get('cpu', '?')}, {m.get('isa', '?')} copy, {m.get('cores', '?')} "
            f"cores, load {(m.get('loadavg') or ['?'])[0]}→{(r.get('loadavg_after') or ['?'])[0]}; "
            f"{r.get('commit', '?')}, {r.get('date', '?')}; "
            + ", ".join(f"{k} {v}" for k, v in r.get("settings", {}).items()) + "."]


# ---------------------------------------------------------------------------------------------
# a real scene from photos (benchmarks/real_scene.py)


def real_factor_lines(recs: list[tuple[str, dict]]) -> list[str]:
    """One row per record of a one-factor comparison on a real scene: (label, record) pairs, the
    held-out PSNR at each evaluation, the final metrics and the Gaussian count."""
    steps = sorted({s for _, rec in recs for s, *_ in rec["result"]["train"]["psnr_curve"]["test"]})
    lines = ["| training | " + " | ".join(f"{s:,}" for s in steps) + " | held-out PSNR / SSIM (8-bit) "
             "| Gaussians | run |",
             "|---|" + "---|" * len(steps) + "---|---|---|"]
    for label, rec in recs:
        r = rec["result"]
        curve = dict((s, v) for s, v, *_ in r["train"]["psnr_curve"]["test"])
        lines.append(f"| {label} | " + " | ".join(dash(curve.get(s), ".2f") for s in steps)
                     + f" | {r['eval']['psnr']:.2f} / {r['eval']['ssim']:.3f} | "
                     f"{r['train']['gaussians_final']:,} | {rec['commit'][:12]}, {rec['date']} |")
    return lines


def _real_row(rec: dict) -> str:
    r = rec["result"]
    ev, tr = r["eval"], r["train"]
    cpu = tr["machine"].get("cpu") or rec["machine"].get("cpu") or "?"
    resumed = " (resumed; wall summed over its runs)" if tr.get("resumed") else ""
    return (f"| {r['scene']} | gsrender train --preset 3dgs, {tr['gaussians_final']:,} Gaussians | "
            f"{ev['width']}×{ev['height']} | {tr['steps']:,} | {dash(ev['psnr'], '.2f')} | "
            f"{dash(ev['ssim'], '.3f')} | {dash(ev['lpips'], '.3f') if ev['lpips'] is not None else 'n/a'} | "
            f"{tr['wall_seconds'] / 60:.0f} min{resumed}, {tr['machine'].get('threads', '?')} threads ({cpu}) |")


# evaluations per row of a PSNR curve's table: a 30,000-step run evaluated every 1,000 steps
# reads as three tables of ten rather than one of thirty columns
CURVE_COLUMNS = 10


def _training_sentence(rec: dict, first: bool) -> str:
    r = rec["result"]
    ev, tr = r["eval"], r["train"]
    ph = tr.get("seconds_per_step_by_phase") or {}
    head = (f"Training: {tr['train_views']} training / {tr['test_views']} held-out views, " if first
            else f"Resumed to {tr['steps']:,} steps: ")
    return (head + f"{tr['seconds_per_step']:.2f} s a step ("
            + ", ".join(f"{k} {v:.3f}" for k, v in ph.items()) + f"), peak memory "
            f"{(tr['peak_rss_mb'] or 0) / 1024:.1f} GB, {tr['gaussians_initial']:,} → "
            f"{tr['gaussians_final']:,} Gaussians; evaluation on 8-bit renders, "
            f"{dash(ev['fps'], '.1f')} FPS at the test size"
            + (" (a step's seconds averaged over all its runs, whatever else the machine ran at "
               "the time: an upper bound)" if tr.get("resumed") else "") + ".")


def real_scene_lines(rec: dict, longer: list[dict] = ()) -> list[str]:
    """Our held-out metrics beside the published ones (and those of each record in `longer`: the
    same run resumed to a longer budget), then SfM, training by phase of each, and the held-out
    PSNR curve of the longest run."""
    r, last = rec["result"], (longer[-1] if longer else rec)["result"]
    sfm = r["sfm"]
    lines = ["| scene | model | image | steps | held-out PSNR (dB) | SSIM | LPIPS | training |",
             "|---|---|---|---|---|---|---|---|", _real_row(rec), *map(_real_row, longer)]
    for p in last["published"]:
        took = f"{p['minutes']} min ({p['device']})" if p.get("minutes") else "–"
        lines.append(f"| {r['scene']} | {p['method']} (published: {p['source']}) | {p['image']} | "
                     f"{p['steps']:,} | {dash(p['psnr'], '.2f')} | {dash(p['ssim'], '.3f')} | – | {took} |")
    sec = sfm.get("seconds") or {}
    sfm_s = sum(sec.values()) if sec else None
    lines += ["", (f"SfM (`gsrender prepare`, pycolmap {sfm.get('pycolmap')}): {sfm['registered']} of "
                   f"{sfm['photos']} photos registered, {sfm['points3D']:,} points, mean reprojection error "
                   f"{sfm['mean_reprojection_error_px']:.2f} px"
                   + (f"; scene rebuilt from the committed model in {sfm_s:.0f} s (the SfM's own figures: "
                      f"data/scenes/{r['scene']}/README.md)" if sfm.get("from_model") else
                      f", {sfm_s / 60:.0f} min" if sfm_s else "") + ". "
                   + " ".join(_training_sentence(x, i == 0) for i, x in enumerate([rec, *longer])))]
    curve = last["train"]["psnr_curve"]["test"]
    for at in range(0, len(curve), CURVE_COLUMNS):  # a table per CURVE_COLUMNS evaluations
        part = curve[at:at + CURVE_COLUMNS]
        lines += ["", "| step | " + " | ".join(f"{s:,}" for s, *_ in part) + " |",
                  "|---|" + "---|" * len(part),
                  "| held-out PSNR (dB, float renders) | " + " | ".join(f"{v:.2f}" for _, v, *_ in part) + " |"]
    return lines
