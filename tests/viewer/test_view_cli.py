"""`gsrender view` as a new user meets it: its --help, and a start-up where viser is not installed
(the `view` extra missing) ends in a one-line error that names the extra, not a traceback."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import PLANT

ROOT = Path(__file__).resolve().parents[2]


def _gsrender(*args: str, pythonpath: list[Path] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [*pythonpath, ROOT]))}
    return subprocess.run([sys.executable, "-m", "gsrender", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_view_help_lists_its_options():
    proc = _gsrender("view", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "SCENE" in proc.stdout and "--port" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_view_without_viser_names_the_extra(tmp_path):
    # a `viser` package first on the path that fails to import as a missing one does
    (tmp_path / "viser").mkdir()
    (tmp_path / "viser" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'viser'\", name='viser')\n")
    proc = _gsrender("view", str(PLANT), pythonpath=[tmp_path])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gsrender: error: the viewer needs viser"), proc.stderr
    assert "gsrender[view]" in lines[0]
