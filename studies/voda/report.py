"""Tables (mean ± 95 % interval) and sweep plots of a `voda_removal3d.py --protocol` result.

    python studies/voda/report.py benchmarks/results/voda_protocol.json [--images docs/images]

prints the markdown tables (also written next to the JSON as .md) and writes
<images>/voda_sweep_<name>.png (nRDE and lowest-quartile recall against the swept value, every
method beside the others, error bars the 95 % intervals over the sweep seeds).

    python studies/voda/report.py A.json --compare plant B.json plant_full

prints the paired comparison of two structures on their common seeds (the decimated and the
undecimated plant).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gsrender.bench.measure import fmt_ci, mean_ci95  # noqa: E402  (after the path insert)

TABLE_METRICS = (("nrde", "nRDE ↓"), ("rde", "RDE ↓"), ("collateral", "collateral ↓"),
                 ("gaussian_iou", "Gaussian IoU ↑"), ("recall_q1", "recall Q1 ↑"),
                 ("miou", "2D mIoU ↑"), ("iter_ms", "iter ms"))
SWEEP_AXES = {"size": "object size scale (shell spacing / τ_rel·z ≈ 0.7 × scale)",
              "distance": "camera distance to the rig target (m)",
              "shells": "shells per object", "opacity": "shell opacity (range midpoint)",
              "k_max": "K_max (contributors per pixel)"}


def tables(results: dict) -> str:
    out = []
    for st, per_split in results["summary"].items():
        for sp, summ in per_split.items():
            out += [(f"#### structure {st}, split {sp} ({summ['n']} scenes, hidden share of the "
                    f"object Gaussians {fmt_ci(summ['hidden_share'], 2)})"), "",
                    "| method | " + " | ".join(h for _, h in TABLE_METRICS) + " |",
                    "|---|" + "---:|" * len(TABLE_METRICS)]
            for m, s in summ["methods"].items():
                out.append(f"| {m} | " + " | ".join(
                    fmt_ci(s[k], 1 if k == "iter_ms" else 3) for k, _ in TABLE_METRICS) + " |")
            out += ["", ("| paired difference (VODA − same baseline) | ΔnRDE | ΔRDE | "
                         "Δcollateral | Δrecall Q1 | ΔmIoU |"), "|---|---:|---:|---:|---:|---:|"]
            for m, s in summ["methods"].items():
                if "delta" in s:
                    out.append(f"| {m} | " + " | ".join(fmt_ci(s["delta"][k]) for k in (
                        "nrde", "rde", "collateral", "recall_q1", "miou")) + " |")
            out.append("")
    return "\n".join(out)


def _x(name: str, v):
    return (v[0] + v[1]) / 2 if name == "opacity" else v


def plot_sweeps(results: dict, images: Path) -> list[Path]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    images.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, points in results["sweep_summary"].items():
        fig = Figure(figsize=(10, 3.6))
        FigureCanvasAgg(fig)
        methods = list(points[0]["methods"])
        xs = [_x(name, p["value"]) for p in points]
        for j, (key, label) in enumerate((("nrde", "nRDE (lower is better)"),
                                          ("recall_q1", "recall, lowest contribution quartile"),
                                          ("hidden_share", "hidden share of object Gaussians"))):
            ax = fig.add_subplot(1, 3, j + 1)
            if key == "hidden_share":  # how blind a rendered loss is at each point
                ax.errorbar(xs, [p[key][0] for p in points], yerr=[p[key][1] for p in points],
                            marker="o", capsize=3, color="gray")
            for m in methods if key != "hidden_share" else ():
                ax.errorbar(xs, [p["methods"][m][key][0] for p in points],
                            yerr=[p["methods"][m][key][1] for p in points], marker="o",
                            capsize=3, label=m, linestyle="-" if "voda" in m else "--")
            ax.set_xlabel(SWEEP_AXES.get(name, name), fontsize=8)
            ax.set_title(label, fontsize=9)
            ax.grid(alpha=0.3)
            if j == 0:
                ax.legend(fontsize=7)
        paths.append(_save(fig, f"Removal-3D sweep: {name} (isolated split, {points[0]['n']} "
                                "seeds, mean ± 95 % CI)", images / f"voda_sweep_{name}.png"))
    return paths


def _save(fig, title: str, path: Path) -> Path:
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return path


def plot_main(results: dict, images: Path, stem: str) -> list[Path]:
    """Per structure: nRDE and lowest-quartile recall of every method on every split (bars,
    error bars the 95 % intervals over the scenes), the baselines hatched beside VODA."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    images.mkdir(parents=True, exist_ok=True)
    paths = []
    for st, per_split in results["summary"].items():
        splits = [sp for sp in per_split if sp != "all" or len(per_split) == 1]
        methods = list(per_split[splits[0]]["methods"])
        fig = Figure(figsize=(11, 3.6))
        FigureCanvasAgg(fig)
        width = 0.8 / len(methods)
        for j, (key, label) in enumerate((("nrde", "nRDE (lower is better)"),
                                          ("recall_q1", "recall, lowest contribution quartile"))):
            ax = fig.add_subplot(1, 2, j + 1)
            for i, m in enumerate(methods):
                xs = [k + (i - (len(methods) - 1) / 2) * width for k in range(len(splits))]
                ax.bar(xs, [per_split[sp]["methods"][m][key][0] for sp in splits], width,
                       yerr=[per_split[sp]["methods"][m][key][1] for sp in splits], capsize=2,
                       label=m, color=f"C{i // 2 if m != 'vote' else 7}",
                       hatch="" if "voda" in m else "//", edgecolor="black", linewidth=0.4)
            ax.set_xticks(range(len(splits)))
            ax.set_xticklabels([f"{sp} ({per_split[sp]['n']})" for sp in splits], fontsize=8)
            ax.set_title(label, fontsize=9)
            ax.grid(alpha=0.3, axis="y")
            if j == 0:
                ax.legend(fontsize=6, ncol=2)
        paths.append(_save(fig, f"Removal-3D, structure {st}: mean ± 95 % CI over scenes "
                                "(count in brackets); hatched = baseline, plain = + VODA",
                           images / f"{stem}_{st}.png"))
    return paths


def write_report(results: dict, images: Path, md_path: Path | None = None,
                 main_stem: str | None = None) -> str:
    text = tables(results)
    if md_path is not None:
        md_path.write_text(text)
    plots = plot_main(results, images, main_stem) if main_stem else []
    for p in [*plots, *plot_sweeps(results, images)]:
        print(f"wrote {p}")
    print(text)
    return text


def compare(a: dict, st_a: str, b: dict, st_b: str, split: str = "isolated") -> str:
    """Markdown: per method both runs hold, the nRDE / recall Q1 of structure st_a (run a) and
    st_b (run b) on the seeds both have, and the paired per-seed difference b − a (mean ± 95 %
    interval); also the paired VODA gain of each, to show whether st_a stands in for st_b."""

    ra = {r["seed"]: r for r in a["main"][st_a][split]}
    rb = {r["seed"]: r for r in b["main"][st_b][split]}
    seeds = sorted(set(ra) & set(rb))
    if not seeds:
        raise ValueError(f"compare: no seed in both {st_a} and {st_b}")
    methods = [m for m in rb[seeds[0]] if isinstance(rb[seeds[0]][m], dict) and m in ra[seeds[0]]]
    hid = [(ra[s]["hidden_share"], rb[s]["hidden_share"]) for s in seeds]
    out = [f"{st_a} → {st_b}, split {split}, seeds {', '.join(map(str, seeds))}; hidden share of "
           f"the object {fmt_ci(mean_ci95([h[0] for h in hid]), 3)} → "
           f"{fmt_ci(mean_ci95([h[1] for h in hid]), 3)}", "",
           f"| method | nRDE {st_a} | nRDE {st_b} | paired Δ ({st_b} − {st_a}) | recall Q1 {st_a} | "
           f"recall Q1 {st_b} | iter ms {st_a} | iter ms {st_b} |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    col = lambda rows, m, k: mean_ci95([rows[s][m][k] for s in seeds])
    for m in methods:
        d = mean_ci95([rb[s][m]["nrde"] - ra[s][m]["nrde"] for s in seeds])
        out.append(f"| {m} | {fmt_ci(col(ra, m, 'nrde'))} | {fmt_ci(col(rb, m, 'nrde'))} | {fmt_ci(d)} | "
                   f"{fmt_ci(col(ra, m, 'recall_q1'), 2)} | {fmt_ci(col(rb, m, 'recall_q1'), 2)} | "
                   f"{fmt_ci(col(ra, m, 'iter_ms'), 0)} | {fmt_ci(col(rb, m, 'iter_ms'), 0)} |")
    out += ["", f"| paired VODA gain in nRDE (VODA − same baseline) | {st_a} | {st_b} |",
            "|---|---:|---:|"]
    for m in methods:
        base = m.removesuffix("+voda")
        if m.endswith("+voda") and base in methods:
            g = [mean_ci95([r[s][m]["nrde"] - r[s][base]["nrde"] for s in seeds]) for r in (ra, rb)]
            out.append(f"| {m} | {fmt_ci(g[0])} | {fmt_ci(g[1])} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path)
    ap.add_argument("--compare", nargs=3, metavar=("STRUCTURE", "OTHER_JSON", "OTHER_STRUCTURE"),
                    default=None, help="print the paired comparison of STRUCTURE in json with "
                                       "OTHER_STRUCTURE in OTHER_JSON on their common seeds")
    ap.add_argument("--images", type=Path, default=Path("docs/images"))
    ap.add_argument("--main-plot", default=None, metavar="STEM",
                    help="also plot the main tables as <images>/<STEM>_<structure>.png")
    args = ap.parse_args(argv)
    if args.compare:
        st, other, st_other = args.compare
        print(compare(json.loads(args.json.read_text()), st,
                      json.loads(Path(other).read_text()), st_other))
        return 0
    write_report(json.loads(args.json.read_text()), args.images, args.json.with_suffix(".md"),
                 args.main_plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
