"""The mutant list of tools/kernel_mutants.py stays applicable as the kernels change.

Each mutant names one exact piece of kernel source; if an edit to the kernels moves or removes
it, the mutation run would no longer test what it claims. Fast (reads files, builds nothing).
The mutation run itself is tools/kernel_mutants.py (docs/cuda.md, "Mutation score"; the run: docs/cuda_status.md).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("kernel_mutants", ROOT / "tools/kernel_mutants.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (dataclasses look their module up)
    spec.loader.exec_module(mod)
    return mod


km = _load()


@pytest.mark.parametrize("m", km.MUTANTS, ids=lambda m: m.name)
def test_mutant_applies_exactly_once(m):
    text = (ROOT / m.path).read_text()
    assert text.count(m.before) == 1, f"{m.name}: 'before' occurs {text.count(m.before)} times"
    mutated = km.apply(text, m)
    assert mutated != text
    assert m.only and all(m.only), f"{m.name}: no cases selected"


def test_apply_rejects_ambiguous_or_missing_text():
    m = km.MUTANTS[0]
    with pytest.raises(ValueError, match="occurs 0 times"):
        km.apply("nothing here", m)
    with pytest.raises(ValueError, match="occurs 2 times"):
        km.apply(m.before + m.before, m)


def test_list_covers_every_kernel_family():
    names = [m.name for m in km.MUTANTS]
    assert len(names) == len(set(names)) and len(names) >= 20
    paths = {m.path for m in km.MUTANTS}
    for unit in ("rasterize_mma_fwd_kernel.cu", "rasterize_mma_bwd_kernel.cu",
                 "rasterize_fwd_kernel.cu", "rasterize_bwd_kernel.cu", "weight_stats_kernel.cu",
                 "projection_kernel.cu", "sh_kernel.cu", "contributors_kernel.cu",
                 "support_ellipse.h"):
        assert any(p.endswith(unit) for p in paths), f"no mutant in {unit}"
    assert sum(m.race for m in km.MUTANTS) >= 5, "the synchronisation faults run the race check"
