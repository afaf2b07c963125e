"""Drop-in check: examples/gsplat_style_trainer.py, written against `from gsplat import
rasterization`, trains on the CPU when only that import line is swapped for gsrender's front door."""
from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "gsplat_style_trainer.py"
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


def test_densification_statistics_packed_equals_unpacked(tmp_path):
    """The script's DefaultStrategy bookkeeping reads meta["gaussian_ids"] when packed=True and
    meta["radii"] > 0 when packed=False: both must give the same per-Gaussian statistics."""
    mod = _load_swapped(tmp_path)
    gen = torch.Generator().manual_seed(3)
    t = mod.teacher(150, 1, gen)
    vms, Ks = mod.orbit(2, 40, 30)
    states = []
    for packed in (False, True):
        leaves = {k: v.clone().requires_grad_(True) for k, v in t.items()}
        img, _, info = mod.rasterization(leaves["means"], leaves["quats"], leaves["scales"],
                                         leaves["opacities"], leaves["sh"], vms, Ks, 40, 30, sh_degree=1,
                                         packed=packed, absgrad=True)
        info["means2d"].retain_grad()
        (img * torch.linspace(0, 1, 3)).sum().backward()
        state = mod.new_state(150, "cpu")
        mod.update_state(state, info, packed=packed, absgrad=True)
        states.append(state)
    for k in ("grad2d", "count", "radii"):
        torch.testing.assert_close(states[0][k], states[1][k])
    assert states[0]["count"].sum() > 0 and states[0]["grad2d"].sum() > 0
