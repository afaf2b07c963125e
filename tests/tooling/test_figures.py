"""The figure tables of README.md, docs/ and the studies' reports come from benchmarks/results/*.json: each block between
`<!-- figures:begin NAME -->` and `<!-- figures:end NAME -->` is exactly what
tools/figures/report.py renders from those files, and the renderers put each file's values there."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
report = pytest.importorskip("tools.figures.report")


def test_every_figures_block_is_rendered_from_the_results_files():
    for rel in report.DOCS:
        text = (ROOT / rel).read_text()
        assert report.render_text(text, report.RESULTS) == text, (
            f"{rel}: its figures differ from benchmarks/results/; run python tools/figures/report.py --render")
    readme = report.blocks((ROOT / "README.md").read_text())
    assert set(readme) == {"readme", "applications"}
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


# the figures blocks each document must hold (one table each, rendered from its results file)
DOC_BLOCKS = {"README.md": {"readme", "applications"}, "docs/cpu.md": {"cpu_targets"},
              "docs/benchmarks.md": {"fps", "channels", "mipnerf360", "bench_run", "real_bonsai",
                                     "real_bonsai_factors"},
              "docs/training.md": {"train", "train_step", "train_threads"},
              "docs/distributed.md": {"distributed", "distributed_check"}, "docs/gallery.md": {"viewer"},
              "docs/cuda_status.md": {"kernel_cases", "kernel_mutants"},
              "docs/testing.md": {"first_run", "build_profile"}, "docs/cameras.md": {"camera_ut"},
              "studies/voda/REPORT.md": {"voda_trained", "voda_flips", "voda_real_premise", "voda_real",
                                         "voda_faithful_headroom_freeze", "voda_faithful"},
              "studies/loc/REPORT.md": {"loc_trained", "loc_tuning", "loc_trained_earlier",
                                        "loc_real"}}
PROSE_BLOCKS = {"applications"}  # lines of text, not a table
RESULTS_OF = {"mipnerf360": "mipnerf360_synthetic", "readme": "cpu_targets", "applications": "voda_trained",
              "real_bonsai_factors": "real_bonsai"}


def test_every_document_holds_its_tables_rendered_from_a_results_file():
    assert set(DOC_BLOCKS) == set(report.DOCS)
    for rel, names in DOC_BLOCKS.items():
        found = report.blocks((ROOT / rel).read_text())
        assert set(found) == names, rel
        for name in names:
            if (report.RESULTS / f"{RESULTS_OF.get(name, name)}.json").is_file():
                if name not in PROSE_BLOCKS:
                    assert "|---" in found[name], f"{rel}: block {name} has no table"
                assert "(no results file" not in found[name], f"{rel}: block {name}"


def test_the_real_scene_table_takes_its_figures_from_the_record():
    rec = json.loads((report.RESULTS / "real_bonsai.json").read_text())
    text = report.RENDERERS["real_bonsai"](report.RESULTS)
    r = rec["result"]
    assert f"| {r['eval']['psnr']:.2f} | {r['eval']['ssim']:.3f} |" in text
    assert f"{r['train']['gaussians_final']:,} Gaussians" in text and "32.18" in text
    assert f"{r['sfm']['registered']} of {r['sfm']['photos']} photos" in text


def test_a_longer_budget_is_a_second_row_and_its_curve_is_tabled_ten_evaluations_a_row(tmp_path):
    rec = json.loads((report.RESULTS / "real_bonsai.json").read_text())
    (tmp_path / "real_bonsai.json").write_text(json.dumps(rec))
    longer = json.loads(json.dumps(rec))
    tr = longer["result"]["train"]
    tr["steps"], tr["gaussians_final"] = 30000, 1_234_567
    tr["psnr_curve"]["test"] = [[1000 * i, 20 + i / 8] for i in range(1, 31)]
    longer["result"]["eval"]["psnr"] = 31.23
    (tmp_path / "real_bonsai_30000.json").write_text(json.dumps(longer))
    text = report.RENDERERS["real_bonsai"](tmp_path)
    assert f"| {rec['result']['eval']['psnr']:.2f} |" in text and "| 31.23 |" in text
    assert "→ 1,234,567 Gaussians" in text and "Resumed to 30,000 steps: " in text
    heads = [line for line in text.splitlines() if line.startswith("| step |")]
    assert [h.count("|") - 2 for h in heads] == [10, 10, 10]
    assert all(f"{20 + i / 8:.2f}" in text for i in range(1, 31))
    assert report.RENDERERS["real_bonsai_factors"](tmp_path).count("\n| ") == 1  # not a factor row


def test_the_real_scene_factor_rows_come_from_each_record():
    text = report.RENDERERS["real_bonsai_factors"](report.RESULTS)
    factors = [p for p in sorted(report.RESULTS.glob("real_bonsai_*.json"))
               if p not in report.real_budgets(report.RESULTS)]
    for path in [report.RESULTS / "real_bonsai.json", *factors]:
        rec = json.loads(path.read_text())
        r = rec["result"]
        assert f"| {r['eval']['psnr']:.2f} / {r['eval']['ssim']:.3f} | {r['train']['gaussians_final']:,} | " \
            f"{rec['commit'][:12]}" in text, path.name
    assert text.count("\n| ") == 1 + len(factors)  # data rows


def _wrap(folder: Path, name: str, result: dict) -> None:
    machine = {"cpu": "Test CPU 9000", "isa": "avx2", "cores": 2, "threads": 2, "loadavg": [0.5, 0.4, 0.3]}
    (folder / f"{name}.json").write_text(json.dumps({
        "name": name, "config": "full", "command": f"python benchmarks/{name}.py", "machine": machine,
        "loadavg_after": [0.7, 0.4, 0.3], "commit": "abc123", "date": "2026-12-06 00:00 UTC", "result": result}))


def test_the_document_renderers_take_each_value_from_its_file(tmp_path):
    _wrap(tmp_path, "train", {
        "image_size": [494, 371], "views": {"train": ["a"] * 11, "test": ["b", "c"]}, "steps": 1000,
        "seconds_per_step": 0.0812, "cpu_seconds": 150.0, "gaussians_initial": 25784, "gaussians_final": 44336,
        "train": {"psnr": 35.801, "ssim": 0.95}, "test": {"psnr": 25.594, "ssim": 0.8713}})
    train = report.RENDERERS["train"](tmp_path)
    assert "| 11 / 2 | 494×371 | 1000 | 0.081 | 0.150 | 25,784 → 44,336 | 35.80 / 25.59 | 0.871 |" in train
    assert "`python benchmarks/train.py`: Test CPU 9000, avx2 copy, 2 threads of 2 cores, load 0.5→0.7" in train
    _wrap(tmp_path, "train_threads", {"rounds": 2, "settings": {
        "1 thread": [{"cpu_ms": 158.2, "wall_ms": 1129.4, "loadavg": [10.0]},
                     {"cpu_ms": 169.0, "wall_ms": 1953.0, "loadavg": [13.0]}]}})
    assert "| 1 thread | 158, 169 | 1129, 1953 |" in report.RENDERERS["train_threads"](tmp_path)
    run = {"ranks": 1, "step_s_max": 1.25, "transport_s_max": 0.0005, "bytes_per_step_per_rank": [2.23e6],
           "rows_sent_per_rank": [24284], "gaussians": 25784, "image": [247, 186],
           "one_process_kernels_ms_this_rank_shard": {"project": 11.0, "raster_fwd": 215.0}}
    _wrap(tmp_path, "distributed", {"runs": [run, dict(run, ranks=2, step_s_max=1.5)]})
    dist = report.RENDERERS["distributed"](tmp_path)
    assert "| 1 | 1.25 | 1 | 0.80 | 2.23 MB (24,284 rows) | 0.5 ms |" in dist
    assert "| 2 | 1.50 | 2 | 1.33 |" in dist and "1.67× the views per second" in dist
    assert "project 11; raster_fwd 215" in dist
    _wrap(tmp_path, "viewer", {"n_gaussians": 113648, "full": {
        "width": 640, "height": 480, "frames": 24, "frame_ms_median": 43.2, "render_ms_median": 37.9,
        "send_ms_median": 5.2, "frame_ms_p90": 50.4, "cpu_ms_median": 71.0, "fps_median": 23.27}})
    assert "| still, 640×480 (24 frames) | 43 (38 + 5) | 50 | 71 | 23.3 |" in report.RENDERERS["viewer"](tmp_path)


def test_the_distributed_check_and_the_mutants_render_from_their_files(tmp_path):
    def runs(psnr, steps, views):
        return [{"seed": s, "steps": steps, "views_per_step": views, "wall_s": 100.0 + s, "test_psnr": p,
                 "test_ssim": 0.8, "train_psnr": 24.0 + s, "gaussians": 27100 + s} for s, p in enumerate(psnr)]
    _wrap(tmp_path, "distributed_check", {
        "steps": 200, "seeds": [0, 1], "runs": {"two_ranks": runs([22.0, 23.0], 100, 2),
                                                "batch2": runs([22.0, 22.9], 100, 2), "one": runs([21.0, 22.0], 200, 1)},
        "ply_two_ranks_vs_batch2": [{"seed": 0, "same_count": True, "max_position": 0.007, "max_opacity": 0.03}]})
    check = report.RENDERERS["distributed_check"](tmp_path)
    assert "| 2 ranks, `--steps 200` | 100 × 2 | 22.50 ± 6.35 (22.000, 23.000) |" in check  # t(1) = 12.706
    assert "+0.0500 ± 0.6353 dB** held out (+0.0000, +0.1000)" in check
    assert "+1.00 ± 0.00 dB** held out" in check and "in 2 of 2 seeds" in check
    assert "position difference 0.007, opacity 0.03 (1 seeds)" in check
    _wrap(tmp_path, "kernel_mutants", {"killed": 2, "n_cases": 231, "total_s": 489.0, "baseline_s": 146.0, "mutants": [
        {"name": "m_cases", "path": "csrc/cuda/a.cu", "killed_by": [
            "plain build: summary: 9 passed, 5 failed, 0 skipped of 14; first: FAIL case_x: alphas err 3.2e-01; aux"]},
        {"name": "m_race", "path": "csrc/cuda/b.cu", "killed_by": [
            ("race build: gsr_simt: aborted: racecheck: read / write hazard on shared memory 0x4: read by thread 8 "
            "at csrc/cuda/ptx.cuh:97 <- csrc/cuda/c.cu:90; then write by thread 0 at "
            "csrc/cuda/b.cu:46; no __syncwarp between them")]},
        {"name": "m_live", "path": "x/d.cu", "killed_by": []}]})
    mut = report.RENDERERS["kernel_mutants"](tmp_path)
    assert "**2 of 3 mutants killed** against 231 cases" in mut and "489 s wall" in mut
    assert "| `m_cases` | `a.cu` | cases: 5/14 fail (case_x: alphas err 3.2e-01) |" in mut
    assert "| `m_race` | `b.cu` | race: read / write (shared) c.cu:90 / b.cu:46, no __syncwarp |" in mut
    assert "| `m_live` | `d.cu` | **survived** |" in mut
    assert "no results file" in report.RENDERERS["first_run"](tmp_path)
    _wrap(tmp_path, "bench_run", {"walls_s": {"cpu_targets": 31.4, "fps": 8.0, "gallery images": 40.2},
                                  "failed": ["fps"], "total_s": 912.0})
    run = report.RENDERERS["bench_run"](tmp_path)
    assert "| cpu_targets | 31 |" in run and "| fps (no new result) | 8 |" in run
    assert "| gallery images | 40 |" in run and "| **all of `make bench`** | **912** (15.2 min) |" in run


def test_the_kernel_case_set_and_the_first_run_render_from_their_files(tmp_path):
    _wrap(tmp_path, "kernel_cases", {
        "n_cases": 231, "size_mb": 88.4, "longest_list": 2143, "make_cases": {"wall_s": 10.2, "cpu_s": 9.0},
        "check_summary": "summary: 231 passed, 0 failed, 0 skipped of 231",
        "scenes": {"tiny": {"cases": 103, "cpu_s": 2.14, "wall_s": 5.31}},
        "headroom": {"bf16/grad": {"value": 6.14e-4, "case": "rasterize_bwd_x: v_opacities", "bar": 0.002},
                     "f32/value_share": {"value": 5.09e-5, "case": "rasterize_fwd_y: render", "bar": 0.001}}})
    cases = report.RENDERERS["kernel_cases"](tmp_path)
    assert "231 cases, 88 MB, longest tile list 2,143 entries; `make_cases` 10 s wall" in cases
    assert "summary: 231 passed" in cases and "| tiny | 103 | 2.1 | 5.3 |" in cases
    assert "| bf16 | gradient 1 − cos, whole array | 6.1e-04 (rasterize_bwd_x: v_opacities) | 2e-03 |" in cases
    assert "| f32 | share of elements past the value bound | 5.1e-05 (rasterize_fwd_y: render) | 1e-03 |" in cases
    (tmp_path / "first_run.json").write_text(json.dumps({
        "machine": {"cpu": "Test CPU 9000", "isa": "avx2", "cores": 2, "threads": 2, "loadavg": [0.4]},
        "loadavg_after": [1.9], "commit": "def456", "date": "2026-12-06T00:00:00Z", "demo_first_image_s": 268.4, "demo_total_s": 300.2,
        "command_cpu_s": 520.0, "build_cpu_s": 201.0, "build_peak_rss_gb": 1.26, "venv_gb": 1.27,
        "settings": {"MAX_JOBS": "2"}}))
    first = report.RENDERERS["first_run"](tmp_path)
    assert "| 268 | 300 | 520 | 201 | 1.26 | 1.27 |" in first
    assert "Test CPU 9000, avx2 copy, 2 cores, load 0.4→1.9; def456, 2026-12-06T00:00:00Z; MAX_JOBS 2." in first


def test_the_application_studies_render_from_their_files():
    voda = json.loads((report.RESULTS / "voda_trained.json").read_text())
    # SplitGS-Loc's line gives its current evaluation, or the earlier method's until that exists
    loc_name = ("loc_trained" if (report.RESULTS / "loc_trained.json").is_file()
                else "loc_trained_earlier")
    loc = json.loads((report.RESULTS / f"{loc_name}.json").read_text())
    apps = report.RENDERERS["applications"](report.RESULTS)
    d = voda["summary"]["delta"]["gg+voda − gg"]["nrde"]
    assert f"paired ΔnRDE {d[0]:.2f} ± {d[1]:.2f} over" in apps
    r = loc["summary"]["splitgs"]["recall_2cm2deg"]
    assert f"R@2cm2° {100 * r[0]:.0f} ± {100 * r[1]:.0f} %" in apps
    assert f"{len(loc['scenes'])} scenes × {loc['sizes']['queries']} queries" in apps
    table = report.RENDERERS["voda_trained"](report.RESULTS)
    for m in voda["summary"]["methods"]:
        assert f"| {m} | " in table
    assert "| splitgs | " in report.RENDERERS[loc_name](report.RESULTS)
    if (report.RESULTS / "loc_real.json").is_file():  # the real-scene study, when it has run
        real = json.loads((report.RESULTS / "loc_real.json").read_text())
        r = real["results"]["splitgs"]["recall_2cm2deg"]
        assert f"{100 * r[0]:.0f} [{100 * r[1]:.0f}, {100 * r[2]:.0f}] % (" in apps
        assert f"{real['queries']} held-out photos" in apps
        table = report.RENDERERS["loc_real"](report.RESULTS)
        for m in real["methods"]:
            assert f"| {m} | {real['results'][m]['map_points']:,} |" in table
        assert real["command"] in table


def test_a_whole_run_wraps_each_result_keeps_recorded_ones_and_times_every_step(tmp_path, monkeypatch):
    write = ("import json, pathlib, sys; p = pathlib.Path(sys.argv[1]); p.mkdir(parents=True); "
             "(p / 'r.json').write_text(json.dumps({'value': 3}))")
    monkeypatch.setattr(report, "BENCHES", {
        "wrapped": report.Bench(("-c", write, "{out}"), None, "r.json"),
        "recorded": report.Bench(("-c", write, "{out}"), None, "r.json", recorded=True),
        "broken": report.Bench(("-c", "raise SystemExit(3)"), None, "r.json"),
        "long": report.Bench(("-c", write, "{out}"), None, "r.json", long=True)})
    monkeypatch.setattr(report, "ROOT", tmp_path)  # out/ under tmp_path, commands run there
    monkeypatch.setattr(report, "run_gallery", lambda: (1.5, True))
    monkeypatch.setattr(report, "render_docs", lambda results, write: [])
    results = tmp_path / "results"
    assert report.main(["--results", str(results)]) == 0
    wrapped = json.loads((results / "wrapped.json").read_text())
    assert wrapped["result"] == {"value": 3} and wrapped["config"] == "full" and "cpu" in wrapped["machine"]
    assert json.loads((results / "recorded.json").read_text()) == {"value": 3}
    assert not (results / "broken.json").exists() and not (results / "long.json").exists()
    run = json.loads((results / "bench_run.json").read_text())["result"]
    assert list(run["walls_s"]) == ["wrapped", "recorded", "broken", "gallery images"]
    assert run["failed"] == ["broken"] and run["walls_s"]["gallery images"] == 1.5
    steps = [v for k, v in run["walls_s"].items() if k != "gallery images"]
    # every figure is rounded to 0.1 s, so the rounded steps may add up to 0.05 s each above it
    assert run["total_s"] >= sum(steps) - 0.05 * len(steps) - 1e-9
    # --only runs what it names, long ones too, and writes no whole-run timing
    (results / "bench_run.json").unlink()
    assert report.main(["--results", str(results), "--only", "long"]) == 0
    assert (results / "long.json").exists() and not (results / "bench_run.json").exists()
