"""Joining dataset-supplied names onto a folder without letting them escape it."""
from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath


def safe_join(root: str | Path, name: str, what: str = "path") -> Path:
    """root / name, refusing names that are absolute or climb out of root.

    Names come from dataset files (COLMAP images.txt, camera JSON), which are untrusted: a name like
    "../../etc/passwd" or "/etc/passwd" must not make us read outside the dataset.
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ValueError(f"{what}: invalid file name {name!r}")
    # Both separators count: a dataset written on Windows may use backslashes.
    posix, win = PurePosixPath(name), PureWindowsPath(name)
    if posix.is_absolute() or win.is_absolute() or win.drive or name.startswith(("/", "\\")):
        raise ValueError(f"{what}: file name {name!r} is absolute; it must be relative to {root}")
    if ".." in posix.parts or ".." in win.parts:
        raise ValueError(f"{what}: file name {name!r} escapes {root} ('..' is not allowed)")
    root = Path(root)
    out = root / name
    # Symlinks inside the dataset may still point outside; compare the resolved paths.
    root_res = root.resolve()
    out_res = out.resolve()
    if out_res != root_res and not out_res.is_relative_to(root_res):
        raise ValueError(f"{what}: file name {name!r} resolves outside {root} (to {out_res})")
    return out


def repo_root() -> Path:
    """The source checkout holding this package (data/, benchmarks/ live there, not installed)."""
    return Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """The shared real-data folder (tests skip and benchmarks stop without it): GSRENDER_DATA,
    else ../shared/data beside the checkout."""
    env = os.environ.get("GSRENDER_DATA")
    return Path(env) if env else repo_root().parent / "shared" / "data"


def sample_dir() -> Path:
    """The bundled sample scene: scene.ply + cameras.json (scripts/make_sample_scene.py)."""
    return repo_root() / "data" / "sample"
