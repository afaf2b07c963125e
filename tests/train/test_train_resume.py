"""Runs that survive a stop: checkpoints, --resume, the deterministic mode, atomic files, the 3DGS
output layout and the --preset 3dgs schedule."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gsrender.io import atomic
from gsrender.train import checkpoint
from gsrender.train.run import PRESETS, build_parser, parse_args
from gsrender.train.run import main as train_main
from gsrender.train.trainer import TrainConfig, Trainer

ROOT = Path(__file__).resolve().parents[2]
# a small synthetic run whose 60 steps cross densifications and opacity resets before and after
# the checkpoint it resumes from (densifying while step < 42: at 10, 20, 30, 40; resets at 20,
# 40), with every kind of state a checkpoint must carry (random backgrounds, split noise, Adam
# moments)
RUN = ["--synthetic", "--synthetic-gaussians", "600", "--synthetic-views", "9", "--width", "40",
       "--height", "30", "--sh-degree", "1", "--densify-every", "10", "--densify-from", "0.1",
       "--densify-until", "0.7", "--opacity-reset-every", "20", "--grad-threshold", "5e-5",
       "--schedule-steps", "60",
       "--eval-every", "0", "--snapshot-every", "0", "--deterministic", "--no-progress",
       "--threads", "2"]


def _ply_bytes(out: Path, step: int) -> bytes:
    return (out / "point_cloud" / f"iteration_{step}" / "point_cloud.ply").read_bytes()


@pytest.mark.parametrize("adam", [[], ["--fused-adam"]], ids=["foreach_adam", "fused_adam"])
def test_resumed_run_equals_the_uninterrupted_one_bit_for_bit(tmp_path, adam):
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert train_main([*RUN, *adam, "--steps", "60", "--out", str(whole)]) == 0
    # a run stopped at step 35 (its newest checkpoint: step 30), then resumed to 60
    assert train_main([*RUN, *adam, "--steps", "35", "--checkpoint-every", "10", "--out", str(parts)]) == 0
    assert checkpoint.latest(parts).name == "step_0000030.pt"
    assert len(list((parts / "checkpoints").iterdir())) == checkpoint.KEEP  # older ones removed
    assert train_main(["--resume", str(parts), "--steps", "60"]) == 0
    rep = json.loads((parts / "results.json").read_text())
    assert rep["resumed"] and rep["steps"] == 60
    assert _ply_bytes(parts, 60) == _ply_bytes(whole, 60)
    ref = json.loads((whole / "results.json").read_text())
    assert rep["gaussians_final"] == ref["gaussians_final"]
    assert [e for e in rep["densify_log"]] == [e for e in ref["densify_log"]]
    assert any(e.get("opacity_reset") for e in rep["densify_log"])
    assert any(e.get("split", 0) > 0 for e in rep["densify_log"])


@pytest.mark.slow
def test_killed_process_resumes_to_the_same_model(tmp_path):
    """A real kill (SIGKILL mid-run, no clean-up), then `gsrender train --resume`."""
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert train_main([*RUN, "--steps", "60", "--out", str(whole)]) == 0
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "gsrender", "train", *RUN, "--steps", "60",
                             "--checkpoint-every", "10", "--out", str(killed)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not (killed / "checkpoints" / "step_0000020.pt").exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "results.json").exists()  # it died before the end
    r = subprocess.run([sys.executable, "-m", "gsrender", "train", "--resume", str(killed)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _ply_bytes(killed, 60) == _ply_bytes(whole, 60)


def test_resume_errors_name_the_problem(tmp_path, capsys):
    with pytest.raises(SystemExit, match="no checkpoint"):
        parse_args(["--resume", str(tmp_path)], "gsrender train")
    bad = checkpoint.path_for(tmp_path, 10)
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a checkpoint")
    assert train_main(["--resume", str(tmp_path)]) == 1
    assert "cannot read checkpoint" in capsys.readouterr().err


def test_resume_keeps_the_runs_own_options(tmp_path):
    out = tmp_path / "r"
    assert train_main([*RUN, "--steps", "10", "--checkpoint-every", "10", "--out", str(out)]) == 0
    args, state = parse_args(["--resume", str(out), "--steps", "20"], "gsrender train")
    assert args.steps == 20 and args.width == 40 and args.deterministic and args.out == str(out)
    assert state["trainer"]["step"] == 10


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "a.json"
    atomic.write_json(path, {"v": 1})
    with pytest.raises(RuntimeError), atomic.atomic_path(path) as tmp:
        tmp.write_text('{"v": 2, "trunc')
        raise RuntimeError("killed half-way")
    assert json.loads(path.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_preset_3dgs_sets_the_released_schedule():
    p = build_parser()
    args, _ = parse_args(["--synthetic", "--preset", "3dgs", "--steps", "7000"], "gsrender train")
    assert (args.lr_scale, args.background, args.schedule_steps) == (1.0, "black", 30000)
    assert args.steps == 7000 and args.opacity_reset_every == 3000
    # an option on the command line wins over the preset
    args, _ = parse_args(["--synthetic", "--preset", "3dgs", "--background", "white"], "gsrender train")
    assert args.background == "white"
    assert p.parse_args(["--synthetic"]).lr_scale != PRESETS["3dgs"]["lr_scale"]


def test_schedule_length_apart_from_the_budget():
    """--steps 7000 of a 30000-step schedule: progress 7000/30000 at the end, SH degree 0..3 by
    1000s of steps, the run stops at 7000."""
    params = {"means": torch.zeros(4, 3), "log_scales": torch.zeros(4, 3),
              "quats": torch.tensor([[1.0, 0, 0, 0]]).repeat(4, 1), "logit_opacities": torch.zeros(4),
              "sh_dc": torch.zeros(4, 1, 3), "sh_rest": torch.zeros(4, 15, 3)}
    tr = Trainer(params, 1.0, TrainConfig(steps=7000, schedule_steps=30000, sh_every=1000 / 30000))
    tr.step_count = 2999
    assert tr.active_sh_degree() == 2 and not tr.done()
    tr.step_count = 7000
    assert tr.done() and tr.progress() == pytest.approx(7000 / 30000)
    assert tr.active_sh_degree() == 3
