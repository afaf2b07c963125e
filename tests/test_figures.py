"""The figure tables of README.md and docs/ come from benchmarks/results/*.json: each block between
`<!-- figures:begin NAME -->` and `<!-- figures:end NAME -->` is exactly what
benchmarks/report.py renders from those files, and the renderers put each file's values there."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
report = pytest.importorskip("benchmarks.report")


def test_every_figures_block_is_rendered_from_the_results_files():
    for rel in report.DOCS:
        text = (ROOT / rel).read_text()
        assert report.render_text(text, report.RESULTS) == text, (
            f"{rel}: its figures differ from benchmarks/results/; run python benchmarks/report.py --render")
    readme = report.blocks((ROOT / "README.md").read_text())
    assert set(readme) == {"readme"}
    cpu = json.loads((report.RESULTS / "cpu_targets.json").read_text())
    for t in cpu["result"]["targets"]:
        if "accumulation" not in t["target"]:
            assert f"| CPU: {t['target']} (goal {t['goal']}) |" in readme["readme"], t["target"]
    assert "Run 1: " in readme["readme"]


def _fake_results(folder: Path) -> None:
    machine = {"cpu": "Test CPU 9000", "isa": "avx2", "cores": 2, "threads": 2, "loadavg": [0.5, 0.4, 0.3]}
    wrap = {"config": "full", "machine": machine, "loadavg_after": [0.7, 0.4, 0.3], "commit": "abc123",
            "date": "2026-12-06 00:00 UTC"}
    case = {"n_gaussians": 1000, "D": 0, "fwd_ms": 12.5, "fwd_bwd_ms": 30.0, "pairs": 4321,
            "pairs_contributing": 98765,
            "stages_ms": {"project": 1.0, "sh": 2.0, "bin": 3.0, "raster_fwd": 4.0}}
    targets = [{"target": "1,000 RGB forward ms", "goal": "<= 60", "value": 12.5, "ok": True, "range": [11.25, 13.75]},
               {"target": "D=64 accumulation / sgemm", "goal": ">= 0.40", "gflops": 33.0, "sgemm": 66.0,
                "value": 0.5, "ok": True},
               {"target": "5,000 @192x108 fwd+bwd peak RSS MB", "goal": "<= 2048", "value": 1536.0, "ok": True}]
    (folder / "cpu_targets.json").write_text(json.dumps(dict(
        wrap, name="cpu_targets", command="python benchmarks/cpu_render.py --targets",
        result={"cases": [case], "big": dict(case, n_gaussians=5000, fwd_bwd_ms=None), "targets": targets})))
    (folder / "first_run.json").write_text(json.dumps({
        "machine": machine, "commit": "def456", "date": "2026-12-06", "demo_first_image_s": 268.4,
        "build_cpu_s": 201.0, "build_peak_rss_gb": 1.26}))


def test_the_renderers_take_each_value_from_its_file(tmp_path):
    _fake_results(tmp_path)
    readme = report.render_readme(tmp_path)
    assert "| CPU: 1,000 RGB forward ms (goal <= 60) | 12.5 [11.2–13.8] |" in readme
    assert "| CPU: 5,000 @192x108 fwd+bwd peak RSS MB (goal <= 2048) | 1536 |" in readme
    assert "accumulation" not in readme  # docs/cpu.md's table has them
    assert "| 268 |" in readme and "| 201, 1.3 |" in readme
    assert "Test CPU 9000, avx2 copy, 2 threads of 2 cores, load 0.5→0.7; abc123" in readme
    assert "viewer" not in readme and "training step" not in readme  # no results file: no row
    cpu = report.RENDERERS["cpu_targets"](tmp_path)
    assert "| 1,000 | 0 | 12.5 | 30.0 | 1.0 | 2.0 | 3.0 | 4.0 | 4,321 | 98,765 |" in cpu
    assert "| D=64 accumulation / sgemm | >= 0.40 | 0.50 (33 of 66 GFLOP/s) | yes |" in cpu
    # a block in a markdown text is replaced, the text around it kept
    text = "before\n<!-- figures:begin cpu_targets -->\nstale\n<!-- figures:end cpu_targets -->\nafter\n"
    out = report.render_text(text, tmp_path)
    assert out.startswith("before\n<!-- figures:begin cpu_targets -->\n| N |") and out.endswith(
        "<!-- figures:end cpu_targets -->\nafter\n") and "stale" not in out
    with pytest.raises(ValueError, match="no renderer"):
        report.render_text("<!-- figures:begin nope -->\n<!-- figures:end nope -->\n", tmp_path)
