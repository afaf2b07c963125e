"""Drop-in check: examples/gsplat_style_trainer.py, written against `from gsplat import
rasterization`, trains on the CPU when only that import line is swapped for gsrender's front door."""
from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "gsplat_style_trainer.py"
GSPLAT_IMPORT = "from gsplat import rasterization\n"
OURS = "from gsrender.compat.gsplat import rasterization\n"


def _load_swapped(tmp_path: Path) -> types.ModuleType:
    src = SCRIPT.read_text()
    assert src.count(GSPLAT_IMPORT) == 1, "the script must import gsplat.rasterization on one line"
    src = src.replace(GSPLAT_IMPORT, OURS)
    assert "gsplat import" not in src.replace(OURS, "")  # nothing else comes from gsplat
    path = tmp_path / SCRIPT.name
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("gsplat_style_trainer_swapped", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_trainer_loss_falls_with_swapped_import(tmp_path):
    mod = _load_swapped(tmp_path)
    torch.manual_seed(0)
    out = mod.train(steps=40, n_teacher=200, n_student=150, width=48, height=32, n_views=4, sh_degree=1)
    losses = out["losses"]
    first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
    assert last < 0.75 * first, (first, last)
    # densification statistics were gathered from meta["means2d"].absgrad and meta["radii"]
    assert out["count"].sum() > 0 and torch.isfinite(out["grad2d_mean"]).all()
    assert (out["grad2d_mean"] > 0).any() and (out["max_radii"] > 0).any()
