"""The application studies' figures, rendered from their results files for tools/figures/report.py.

The studies (studies/voda/trained.py, studies/loc/trained.py) train their scenes and take
hours, so `make bench` does not run them: their combined results live in
benchmarks/results/voda_trained.json and loc_trained.json, and these renderers turn them into the
tables of studies/voda/REPORT.md and studies/loc/REPORT.md and the two lines per study in README.md."""
from __future__ import annotations

import math
from pathlib import Path

from tools.figures.doc_tables import load


def _missing(name: str) -> str:
    area, _, study = name.partition("_")
    return f"(no results file: benchmarks/results/{name}.json, written by studies/{area}/{study}.py)\n"


def _pm(mc, scale: float = 1.0, nd: int = 2) -> str:
    m, c = mc
    return f"{scale * m:.{nd}f}" if not math.isfinite(c) else f"{scale * m:.{nd}f} ± {scale * c:.{nd}f}"


def voda_command(res: dict) -> str:
    return (f"python studies/voda/trained.py --size {res['size']} --splits {' '.join(res['splits'])}"
            f" --out out/voda_trained {' '.join(map(str, res['seeds']))}")


def render_voda(results: Path) -> str:
    """studies/voda/REPORT.md: the study's tables (studies/voda/trained.py's markdown without its title),
    then the command and the machine."""
    from studies.voda import trained as voda_trained

    res = load(results, "voda_trained")
    if res is None:
        return _missing("voda_trained")
    body = voda_trained.markdown(res).split("\n", 2)[2]
    env = res["env"]
    return (body + f"\n`{voda_command(res)}`: {env['cpu']}, {env['cpu_threads']} threads, load "
            f"{env['loadavg'][0]:.1f} at the end; commit {env['commit'][:12]}, {env['time']}.\n")


def _render_loc_run(name: str):
    """A renderer of studies/loc/trained.py's results file `name` (the study's tables without the
    title; they name the command and the machine)."""
    def render(results: Path) -> str:
        from studies.loc import trained as loc_trained

        res = load(results, name)
        if res is None:
            return (f"(no results file: benchmarks/results/{name}.json, written by "
                    f"studies/loc/trained.py)\n")
        return loc_trained.markdown(res).split("\n", 2)[2]
    render.__doc__ = f"studies/loc/REPORT.md: the tables of benchmarks/results/{name}.json."
    return render


render_loc = _render_loc_run("loc_trained")  # the evaluation seeds
render_loc_tuning = _render_loc_run("loc_tuning")  # the tuning seeds the defaults were chosen on
# the earlier method (all contributors lifted, normal axis split, peak rule, no ratio test)
render_loc_earlier = _render_loc_run("loc_trained_earlier")


def render_loc_real(results: Path) -> str:
    """studies/loc/REPORT.md: SplitGS-Loc on the real bonsai model (studies/loc/real.py), its
    tables, then the command, the machine and the wall time."""
    from studies.loc import real as loc_real

    res = load(results, "loc_real")
    if res is None:
        return _missing("loc_real")
    env = res["env"]
    return (loc_real.markdown(res) + f"\n`{res['command']}`: {env['cpu']}, {env['cpu_threads']} "
            f"threads, load {env['loadavg'][0]:.1f} at the end; commit {env['commit'][:12]}, "
            f"{env['time']}; wall {res['wall_s'] / 60:.0f} min.\n")


def render_voda_flips(results: Path) -> str:
    """studies/voda/REPORT.md: what VODA adds to Gaussian Grouping's selection (studies/voda/flips.py)."""
    from studies.voda import flips as voda_flips

    res = load(results, "voda_flips")
    if res is None:
        return _missing("voda_flips")
    seeds = " ".join(map(str, res["seeds"]))
    return (voda_flips.markdown(res) + f"\n`python studies/voda/flips.py --size {res['size']} "
            f"--split {res['split']} --out out/voda_flips {seeds}`: {res['env']['cpu']}, commit "
            f"{res['env']['commit'][:12]}, {res['env']['time']}.\n")


def render_voda_real_premise(results: Path) -> str:
    """studies/voda/REPORT.md: the real bonsai model's objects and hidden shares (studies/voda/real.py)."""
    rec = load(results, "voda_real_premise")
    if rec is None:
        return _missing("voda_real_premise")
    r = rec["result"]
    lines = ["| Gaussians of | count | hidden share |", "|---|---|---|"]
    for name, row in r["objects"].items():
        share = "–" if row["hidden_share"] is None else f"{100 * row['hidden_share']:.3f} %"
        lines.append(f"| {'the whole model' if name == 'all' else name} | {row['gaussians']:,} | {share} |")
    return "\n".join(lines) + (f"\n\nHidden: rendered weight summed over the {r['views']} training views "
                               f"under {r['hidden_rel']:g} × the median Gaussian's. `{rec['command']}`: "
                               f"{rec['machine'].get('cpu', '?')}, commit {rec['commit']}, {rec['date']}.\n")


def render_voda_real(results: Path) -> str:
    """studies/voda/REPORT.md: the removal study on the real bonsai model
    (studies/voda/real_removal.py): its tables without the title, the command and the machine."""
    from studies.voda import real_removal

    res = load(results, "voda_real")
    if res is None:
        return "(no results file: benchmarks/results/voda_real.json, written by studies/voda/real_removal.py)\n"
    env = res["env"]
    return (real_removal.markdown(res).split("\n", 2)[2] + f"\n`{res['command']}` (seeds "
            f"{' '.join(map(str, res['seeds']))}): {env['cpu']}, {env['cpu_threads']} threads, load "
            f"{env['loadavg'][0]:.1f} at the end, {res['seconds'] / 60:.0f} min; commit "
            f"{env['commit'][:12]}, {env['time']}.\n")


def _render_voda_faithful(name: str):
    """A renderer of studies/voda/faithful.py's results file `name`: its tables without the title,
    then the command and the machine."""
    def render(results: Path) -> str:
        from studies.voda import faithful

        res = load(results, name)
        if res is None:
            return f"(no results file: benchmarks/results/{name}.json, written by studies/voda/faithful.py)\n"
        env = res["env"]
        return (faithful.markdown(res).split("\n", 2)[2] + f"\n`{faithful.command(res)}`: {env['cpu']}, "
                f"{env['cpu_threads']} threads, load {env['loadavg'][0]:.1f} at the end; commit "
                f"{env['commit'][:12]}, {env['time']}.\n")
    render.__doc__ = f"studies/voda/REPORT.md: the tables of benchmarks/results/{name}.json."
    return render


render_voda_faithful = _render_voda_faithful("voda_faithful")  # the evaluation seeds
# the tuning rows the defaults were frozen on (isolated and occluding tuning scenes)
render_voda_faithful_freeze = _render_voda_faithful("voda_faithful_headroom_freeze")


def _voda_line(res: dict) -> str:
    s = res["summary"]
    d = s["delta"]
    per_split = {sp: sum(r["scene"]["split"] == sp for r in res["rows"]) for sp in res["splits"]}
    scenes = ", ".join(f"{n} {sp}" for sp, n in per_split.items())
    # measured before the clustering default was frozen: say so (its file predates the switch)
    before = res.get("voda_config", {}).get("clustering", "gap") == "gap"
    return (f"VODA{' (chained-gap clusters, before the freeze)' if before else ''} on 3DGS models "
            f"trained from images ({scenes} scenes, {res['size']} size, "
            f"Gaussian Grouping as released): paired ΔnRDE {_pm(d['gg+voda − gg']['nrde'])} over "
            f"Gaussian Grouping, {_pm(d['grouping+voda − grouping']['nrde'])} over the stronger kNN "
            f"(< 0: VODA better); object Gaussians hidden in the trained models "
            f"{_pm(s['hidden_share_objects'], 100, 2)} %.")


def _voda_faithful_line(res: dict) -> str:
    """VODA with its frozen defaults on the headroom regime's evaluation seeds: the gate first,
    since without it no removal method has room to beat the baseline."""
    s = res["summary"]
    d = s["delta"]
    per_split = {sp: sum(r["scene"]["split"] == sp for r in res["rows"]) for sp in res["splits"]}
    scenes = ", ".join(f"{n} {sp}" for sp, n in per_split.items())
    g = d["gg − oracle"]["nrde"]
    gate = "passes" if math.isfinite(g[1]) and g[0] - g[1] > 0 else "does not pass"
    return (f"VODA with its frozen defaults (ray-depth clusters) on the `headroom` regime "
            f"({scenes} scenes, evaluation seeds {min(res['seeds'])}–{max(res['seeds'])}): the gate "
            f"(oracle beats gg beyond the interval, gg − oracle {_pm(d['gg − oracle']['nrde'])}) "
            f"{gate}; paired ΔnRDE {_pm(d['gg+voda − gg']['nrde'])} over Gaussian Grouping, "
            f"{_pm(d['grouping+voda − grouping']['nrde'])} over the stronger kNN (< 0: VODA better), "
            f"VODA as before the freeze against the frozen one {_pm(d['gg+voda[before] − gg+voda']['nrde'])}; "
            f"object Gaussians hidden {_pm(s['hidden_share_objects'], 100, 1)} %, "
            f"gg's recall of the lowest-contribution quartile {_pm(s['methods']['gg']['recall_q1'])}.")


# The one-factor rows the README line names, when the results file has them.
_LOC_LINE_ROWS = {"no_split": "no split", "no_ratio": "no ratio test", "legacy": "the earlier method",
                  "density_opacity": "density child opacity", "no_select": "no selection"}


def _loc_line(res: dict) -> str:
    s = res["summary"]
    r = lambda m, k: _pm(s[m][k], 100, 0)
    rows = ", ".join(f"{label} {r(m, 'recall_2cm2deg')}" for m, label in _LOC_LINE_ROWS.items()
                     if m in s)
    return (f"SplitGS-Loc on the same trained models ({len(res['scenes'])} scenes × "
            f"{res['sizes']['queries']} queries, {res['size']} size): R@2cm2° {r('splitgs', 'recall_2cm2deg')} % "
            f"({rows}; R@5cm5° {r('splitgs', 'recall_5cm5deg')} %); a triangulated map from the same "
            f"images, poses and features {r('triangulated', 'recall_2cm2deg')} %.")


def _voda_real_line(res: dict) -> str:
    s = res["summary"]
    d, by = s["delta_objects"], s.get("delta_by_object", {})
    cell = lambda key: _pm(d[key]["nrde"]) if key in d else "–"
    per = lambda key: ", ".join(f"{name} {_pm(ds[key]['nrde'])}" for name, ds in by.items() if key in ds)
    return (f"VODA on the real bonsai model ({res['gaussians']:,} Gaussians, {len(res['objects'])} "
            f"boxed objects × {len(res['seeds'])} feature-training seeds; < 0: VODA better): paired "
            f"ΔnRDE over Gaussian Grouping {per('gg+voda − gg')} (over seeds), {cell('gg+voda − gg')} "
            f"over objects × seeds; over the stronger kNN {per('grouping+voda − grouping')}; "
            f"gg − oracle {cell('gg − oracle')}.")


def _loc_real_line(res: dict) -> str:
    r = res["results"]
    key = "recall_2cm2deg"  # the synthetic line's threshold, as a fraction of the orbit radius
    th = res["thresholds"][key]
    cell = lambda m: f"{100 * r[m][key][0]:.0f} [{100 * r[m][key][1]:.0f}, {100 * r[m][key][2]:.0f}]"
    med = r["splitgs"]["median_t_pct_radius"]
    others = ", ".join(f"{m} {cell(m)}" for m in ("no_split", "no_ratio", "plain", "depth_backproj",
                                                  "triangulated") if m in r)
    return (f"SplitGS-Loc on the real bonsai model ({res['gaussians']:,} Gaussians; maps from "
            f"{res['map_views']} training photos; its {res['queries']} held-out photos as queries): "
            f"R@{100 * th['frac_radius']:.2f} % of the orbit radius, {th['deg']:g}° {cell('splitgs')} % "
            f"({others}; 95 % bootstrap over the queries); median translation error "
            f"{med[0]:.2f} % of the radius.")


def render_applications(results: Path) -> str:
    """README.md: each study's result in one line, whichever way it goes. Until SplitGS-Loc's
    evaluation of its current defaults exists, its line gives the earlier method's, labelled."""
    lines = []
    for name, line in (("voda_trained", _voda_line), ("loc_trained", _loc_line)):
        res = load(results, name)
        if res is None and name == "loc_trained":
            earlier = load(results, "loc_trained_earlier")
            if earlier is not None:
                lines.append(f"  - The earlier {_loc_line(earlier)} Not yet evaluated with the "
                             "current defaults (studies/loc/REPORT.md).")
                continue
        lines.append(f"  - {line(res)}" if res is not None else f"  - {_missing(name).strip()}")
        if name == "voda_trained" and (faithful := load(results, "voda_faithful")) is not None:
            lines.append(f"  - {_voda_faithful_line(faithful)}")
    if (res := load(results, "voda_real")) is not None:
        lines.append(f"  - {_voda_real_line(res)}")
    if (res := load(results, "loc_real")) is not None:
        lines.append(f"  - {_loc_real_line(res)}")
    return "\n".join(lines) + "\n"


RENDERERS = {"voda_trained": render_voda, "voda_flips": render_voda_flips,
             "voda_real_premise": render_voda_real_premise, "voda_real": render_voda_real,
             "voda_faithful": render_voda_faithful,
             "voda_faithful_headroom_freeze": render_voda_faithful_freeze, "loc_trained": render_loc,
             "loc_tuning": render_loc_tuning, "loc_real": render_loc_real,
             "loc_trained_earlier": render_loc_earlier,
             "applications": render_applications}
