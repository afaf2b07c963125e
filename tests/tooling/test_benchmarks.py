"""Smoke modes of the benchmarks (benchmarks/fps.py, benchmarks/channels.py) and `gsrender bench`
(gsrender.bench.fps, in the package: no checkout needed): each writes valid JSON with the
documented keys and its PNGs, in a few seconds."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gsrender.cli.main import main
from gsrender.io import paths

pytestmark = pytest.mark.slow  # runs each benchmark's smoke configuration (make test-fast leaves it out)

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
needs_checkout = pytest.mark.skipif(not (BENCH / "fps.py").is_file(), reason="benchmarks folder missing")

RUN_KEYS = {"backend", "mode", "precision", "D", "n_gaussians", "width", "height", "fps", "stages_ms",
            "stages_p90_ms", "n_pairs", "packing_efficiency", "peak_mem_mb"}
STAGES = {"project", "sh", "bin", "raster_fwd", "raster_bwd"}
ENV_KEYS = {"device", "torch", "cuda", "commit", "cpu_threads", "loadavg"}
FPS_PNGS = ("time_vs_D.png", "time_vs_N.png", "stages.png")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check_fps(out: Path) -> dict:
    d = json.loads((out / "fps.json").read_text())
    assert ENV_KEYS <= set(d["env"])
    assert d["env"]["commit"] and d["env"]["cpu_threads"] >= 1
    assert d["runs"], "no runs"
    for r in d["runs"]:
        assert RUN_KEYS <= set(r), RUN_KEYS - set(r)
        assert set(r["stages_ms"]) == STAGES and set(r["stages_p90_ms"]) == STAGES
        assert all(v is not None and v >= 0 for v in r["stages_ms"].values())
        assert r["fps"] > 0 and r["n_pairs"] > 0 and r["peak_mem_mb"] >= 0
    # the in-house scalar kernel is always a peer; the dense reference checks correctness on the CPU
    assert {r["precision"] for r in d["runs"]} >= {"auto", "fp32"}
    ref = d["reference_check"]
    assert ref["max_abs_err_matrix"] < 1e-4 and ref["max_abs_err_scalar"] < 1e-4
    assert "| backend |" in (out / "fps.md").read_text()
    for png in FPS_PNGS:
        assert (out / png).read_bytes()[:8] == PNG_MAGIC, png
    return d


@needs_checkout
def test_fps_smoke(tmp_path):
    proc = subprocess.run([sys.executable, str(BENCH / "fps.py"), "--smoke", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    d = _check_fps(tmp_path)
    assert d["config"] == "smoke" and all(r["frames"] == 1 for r in d["runs"])


def test_fps_sweep_flags(tmp_path, capsys):
    # in-process through `gsrender bench` (no second torch import)
    assert main(["bench", "--smoke", "--mode", "sorted,weighted", "--D", "0,3", "--resolution", "40x24",
                 "--n", "500", "--no-peers", "--out", str(tmp_path)]) == 0
    d = json.loads((tmp_path / "fps.json").read_text())
    got = {(r["mode"], r["D"], r["width"], r["height"], r["n_gaussians"]) for r in d["runs"]}
    assert got == {(m, D, 40, 24, 500) for m in ("sorted", "weighted") for D in (0, 3)}
    assert main(["bench", "--smoke", "--mode", "nope", "--out", str(tmp_path)]) == 2
    assert "--mode" in capsys.readouterr().err


@needs_checkout
def test_channels_smoke(tmp_path):
    proc = subprocess.run([sys.executable, str(BENCH / "channels.py"), "--smoke", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    d = json.loads((tmp_path / "channels.json").read_text())
    assert ENV_KEYS <= set(d["env"])
    assert {"n_gaussians", "width", "height", "chunk", "D", "runs"} <= set(d)
    methods = {(r["method"], r["D"]) for r in d["runs"]}
    assert methods == {(m, D) for m in ("matrix", "scalar", "chunked") for D in d["D"]}
    for r in d["runs"]:
        assert r["fwd_ms"] > 0 and r["bwd_ms"] > 0
        assert r["calls"] == (-(-r["D"] // d["chunk"]) if r["method"] == "chunked" else 1)
    assert "| D |" in (tmp_path / "channels.md").read_text()
    assert (tmp_path / "channels.png").read_bytes()[:8] == PNG_MAGIC


def test_gsrender_bench_smoke(tmp_path, capsys):
    assert main(["bench", "--smoke", "--no-peers", "--out", str(tmp_path)]) == 0
    d = json.loads((tmp_path / "fps.json").read_text())
    assert d["runs"] and RUN_KEYS <= set(d["runs"][0])
    assert "wrote fps.json" in capsys.readouterr().out
    for png in FPS_PNGS:
        assert (tmp_path / png).is_file()


@needs_checkout
def test_cpu_targets_smoke(tmp_path):
    """benchmarks/cpu_render.py --targets on tiny scenes: the JSON, markdown and plot appear, every
    issue-14 target is reported, the times and ratios with their range over the rounds."""
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cpu_render.py"), "--targets", "--smoke",
                          "--runs", "2", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    res = json.loads((tmp_path / "cpu_targets.json").read_text())
    assert [c["D"] for c in res["cases"]] == [0, 16, 64, 256]
    assert len(res["targets"]) == 10 and all("fwd_bwd_ms" in c for c in res["cases"])
    assert all(len(c["rounds_ms"]["fwd_ms"]) == 2 == len(c["rounds_stages_ms"]) for c in res["cases"])
    ranged = [t for t in res["targets"] if "range" in t]
    assert len(ranged) == 7 and all(t["range"][0] <= t["range"][1] for t in ranged)
    for t in ranged[:2]:  # the forwards' ms: the median of two rounds lies between them
        assert t["range"][0] <= t["value"] <= t["range"][1], t
    assert res["memory"]["peak_rss_mb"] > res["memory"]["rss_before_mb"] > 0  # the memory target's case
    assert (tmp_path / "cpu_targets.md").read_text().startswith("# CPU renderer")
    assert (tmp_path / "cpu_targets_vs_D.png").stat().st_size > 1000


@needs_checkout
def test_cpu_render_dump_compare(tmp_path):
    """benchmarks/cpu_render.py --dump / --compare: two dumps of one build compare equal (exit 0);
    a changed tensor is named (exit 1)."""
    import torch

    script = str(BENCH / "cpu_render.py")
    for name in ("a.pt", "b.pt"):
        run = subprocess.run([sys.executable, script, "--dump", str(tmp_path / name), "--n-fwd", "3000",
                              "--n-grad", "2000"], capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
    same = subprocess.run([sys.executable, script, "--compare", str(tmp_path / "a.pt"), str(tmp_path / "b.pt")],
                          capture_output=True, text=True)
    assert same.returncode == 0 and "differ: none" in same.stdout, same.stdout + same.stderr
    b = torch.load(tmp_path / "b.pt")
    b["2000.grad.means"][0, 0] += 1
    torch.save(b, tmp_path / "b.pt")
    diff = subprocess.run([sys.executable, script, "--compare", str(tmp_path / "a.pt"), str(tmp_path / "b.pt")],
                          capture_output=True, text=True)
    assert diff.returncode == 1 and "2000.grad.means" in diff.stdout, diff.stdout


@needs_checkout
def test_train_step_smoke(tmp_path):
    """benchmarks/train_step.py on snowmiku_small: every phase timed, both side-by-side ratios."""
    scene = paths.data_dir() / "snowmiku_small"
    if not scene.is_dir():
        pytest.skip(f"shared data folder absent ({scene})")
    run = subprocess.run([sys.executable, str(BENCH / "train_step.py"), "--colmap", str(scene), "--warmup", "1",
                          "--steps", "1", "--threads", "1", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    res = json.loads((tmp_path / "train_step.json").read_text())
    assert set(res["step_ms"]) == {"render", "loss", "backward", "stats", "adam"}
    assert res["ssim_speedup"] > 0 and res["adam_speedup"] > 0
