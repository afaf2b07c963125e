"""Tables (mean ± 95 % interval) and sweep plots of a `voda_removal3d.py --protocol` result.

    python benchmarks/voda_report.py benchmarks/results/voda_protocol.json [--images docs/images]

prints the markdown tables (also written next to the JSON as .md) and writes
<images>/voda_sweep_<name>.png (nRDE and lowest-quartile recall against the swept value, every
method beside the others, error bars the 95 % intervals over the sweep seeds).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TABLE_METRICS = (("nrde", "nRDE ↓"), ("rde", "RDE ↓"), ("collateral", "collateral ↓"),
                 ("gaussian_iou", "Gaussian IoU ↑"), ("recall_q1", "recall Q1 ↑"),
                 ("miou", "2D mIoU ↑"), ("iter_ms", "iter ms"))
SWEEP_AXES = {"size": "object size scale (shell spacing / τ_rel·z ≈ 0.7 × scale)",
              "distance": "camera distance to the rig target (m)",
              "shells": "shells per object", "opacity": "shell opacity (range midpoint)",
              "k_max": "K_max (contributors per pixel)"}


def _fmt(mc, digits=3) -> str:
    m, c = mc
    return f"{m:.{digits}f}" if math.isnan(c) else f"{m:.{digits}f} ± {c:.{digits}f}"


def tables(results: dict) -> str:
    out = []
    for st, per_split in results["summary"].items():
        for sp, summ in per_split.items():
            out += [(f"#### structure {st}, split {sp} ({summ['n']} scenes, hidden share of the "
                    f"object Gaussians {_fmt(summ['hidden_share'], 2)})"), "",
                    "| method | " + " | ".join(h for _, h in TABLE_METRICS) + " |",
                    "|---|" + "---:|" * len(TABLE_METRICS)]
            for m, s in summ["methods"].items():
                out.append(f"| {m} | " + " | ".join(
                    _fmt(s[k], 1 if k == "iter_ms" else 3) for k, _ in TABLE_METRICS) + " |")
            out += ["", ("| paired difference (VODA − same baseline) | ΔnRDE | ΔRDE | "
                         "Δcollateral | Δrecall Q1 | ΔmIoU |"), "|---|---:|---:|---:|---:|---:|"]
            for m, s in summ["methods"].items():
                if "delta" in s:
                    out.append(f"| {m} | " + " | ".join(_fmt(s["delta"][k]) for k in (
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
        fig.suptitle(f"Removal-3D sweep: {name} (isolated split, {points[0]['n']} seeds, "
                     "mean ± 95 % CI)", fontsize=10)
        fig.tight_layout()
        path = images / f"voda_sweep_{name}.png"
        fig.savefig(path, dpi=90)
        paths.append(path)
    return paths


def write_report(results: dict, images: Path, md_path: Path | None = None) -> str:
    text = tables(results)
    if md_path is not None:
        md_path.write_text(text)
    for p in plot_sweeps(results, images):
        print(f"wrote {p}")
    print(text)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path)
    ap.add_argument("--images", type=Path, default=Path("docs/images"))
    args = ap.parse_args(argv)
    write_report(json.loads(args.json.read_text()), args.images, args.json.with_suffix(".md"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
