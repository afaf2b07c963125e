"""Prints requirements from pyproject.toml, one a line, for `pip install -r`: the project's
dependencies with no argument, else the named optional-dependency extras (e.g. `dev loc`).
pyproject.toml is the one list; the Makefile installs from it without building the project.

Usage: python tools/pyproject_deps.py [EXTRA ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    try:
        import tomli as tomllib
    except ModuleNotFoundError:
        sys.exit("tools/pyproject_deps.py needs Python >= 3.11 (tomllib) or the tomli package")


def requirements(extras: list[str]) -> list[str]:
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    if not extras:
        return list(project["dependencies"])
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        sys.exit(f"pyproject.toml has no extra {', '.join(unknown)} (extras: {', '.join(optional)})")
    return [req for e in extras for req in optional[e]]


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1:])))
