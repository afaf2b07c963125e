"""The CPU kernels' instruction-set copies (csrc/cpu/isa.h): listing, switching in-process,
GSRENDER_CPU_ISA at import, refusal of a copy the CPU cannot run (a clear error, never SIGILL) or
the build left out (GSRENDER_CPU_ISA_BUILD=native or host), and `gsrender info`. That every copy renders correctly is checked by the tests marked
@every_cpu_isa (conftest.py), which run once per copy this CPU runs."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gsrender import _C
from gsrender.cli.info import info_dict
from gsrender.cli.main import main

pytestmark = pytest.mark.slow  # imports gsrender in a fresh process per instruction-set copy (make test-fast leaves it out)

ROOT = Path(__file__).resolve().parents[2]
ALL = ("avx512", "avx2", "baseline")  # best first
COPIES = _C.cpu_isa_copies()  # compiled into this build
MISSING = [i for i in ALL if i not in _C.cpu_isas()]  # not runnable here, or not built


def _refusal(isa: str) -> str:
    """The error for choosing isa: the CPU's lack where the build has the copy, else either the
    CPU's lack (checked first) or the build's."""
    lacks = rf"this CPU cannot run the {isa} kernels .*; it runs: " + ", ".join(_C.cpu_isas())
    left_out = rf"the {isa} kernels are not in this build, which has " + ", ".join(COPIES)
    return lacks if isa in COPIES else f"({lacks}|{left_out})"


@pytest.fixture
def restore_isa():
    before = _C.cpu_isa()
    yield
    _C.set_cpu_isa(before)


def test_runnable_isas_best_first_and_switchable(restore_isa):
    isas = _C.cpu_isas()
    assert isas and set(isas) <= set(ALL)
    assert ("baseline" in isas) == ("baseline" in COPIES)  # the baseline copy runs anywhere
    assert isas == sorted(isas, key=ALL.index)
    assert _C.cpu_isa() in isas
    for isa in isas:
        assert _C.set_cpu_isa(isa) == isa and _C.cpu_isa() == isa
    assert _C.set_cpu_isa("auto") == isas[0] == _C.cpu_isa()


def test_copies_built_hold_every_runnable_one():
    assert COPIES and set(COPIES) <= set(ALL)
    assert COPIES == sorted(COPIES, key=ALL.index)
    assert set(_C.cpu_isas()) <= set(COPIES)


def test_unknown_isa_names_the_choices(restore_isa):
    before = _C.cpu_isa()
    with pytest.raises(ValueError, match=r"unknown CPU ISA 'sse9'; choose auto, avx512, avx2 or baseline"):
        _C.set_cpu_isa("sse9")
    with pytest.raises(TypeError):
        _C.set_cpu_isa(2)
    assert _C.cpu_isa() == before


@pytest.mark.skipif(not MISSING, reason="this CPU runs every copy and the build has them all: none to refuse")
def test_isa_the_cpu_lacks_or_the_build_left_out_is_refused(restore_isa):
    before = _C.cpu_isa()
    for isa in MISSING:
        with pytest.raises(RuntimeError, match=_refusal(isa)):
            _C.set_cpu_isa(isa)
        assert _C.cpu_isa() == before


def _import_with(isa: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GSRENDER_CPU_ISA": isa}
    return subprocess.run([sys.executable, "-c", "from gsrender import _C; print(_C.cpu_isa())"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_env_var_chooses_the_copy_at_import():
    last = _C.cpu_isas()[-1]  # the baseline copy where the build has it
    proc = _import_with(last)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == last
    proc = _import_with("fast")
    assert proc.returncode == 1 and "GSRENDER_CPU_ISA: unknown CPU ISA 'fast'" in proc.stderr
    for isa in MISSING[:1]:  # an exception at import, not an illegal instruction (returncode -4)
        proc = _import_with(isa)
        assert proc.returncode == 1, proc.returncode
        assert re.search("GSRENDER_CPU_ISA: " + _refusal(isa), proc.stderr), proc.stderr


def test_info_reports_the_active_copy(restore_isa, capsys):
    last = _C.cpu_isas()[-1]
    _C.set_cpu_isa(last)
    d = info_dict()
    assert d["cpu_isa"] == last and d["cpu_isas"] == _C.cpu_isas()
    assert d["cpu_isa_copies"] == COPIES
    assert main(["info"]) == 0
    assert f"CPU kernels: {last} copy (this CPU runs " + ", ".join(_C.cpu_isas()) in capsys.readouterr().out
