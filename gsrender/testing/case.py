"""The case format (version 1). A case is a folder::

    case.json            header: kernel, precision, params, compare rules, and per section
                         (inputs / expected / outputs) each array's dtype, shape and file
    inputs/<name>.bin    raw little-endian C-order arrays, no padding, no pickle
    expected/<name>.bin  the CPU backend's outputs
    outputs/<name>.bin   (a driver's result case) what the CUDA kernel wrote

The header is plain JSON so that the C++ driver (tools/kernel_driver/case_io.h) reads it with a
few dozen lines; its keys are fixed here and there. Arrays are float32, float64, int32, int64 or
uint8.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FORMAT = "gsrender-case"
VERSION = 1
SECTIONS = ("inputs", "expected", "outputs")
DTYPES = {"float32": "<f4", "float64": "<f8", "int32": "<i4", "int64": "<i8", "uint8": "u1"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class Case:
    """One case in memory. ``arrays[section][name]`` are NumPy arrays; ``params`` the kernel's
    scalar parameters (JSON numbers / bools / lists of numbers); ``compare`` maps an expected
    array name to its rule (see gsrender.testing.check)."""

    name: str
    kernel: str
    precision: str
    params: dict
    arrays: dict = field(default_factory=lambda: {s: {} for s in SECTIONS})
    compare: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)  # free-form (driver status, source case, timings)


def _check_array(section: str, name: str, a) -> np.ndarray:
    if not _NAME.match(name):
        raise ValueError(f"{section}: array name {name!r} must be an identifier")
    a = np.asarray(a)
    dt = a.dtype.name
    if dt == "bool":
        a, dt = a.astype(np.uint8), "uint8"
    if dt not in DTYPES:
        raise ValueError(f"{section}/{name}: dtype {dt} is not one of {sorted(DTYPES)}")
    return np.ascontiguousarray(a, dtype=DTYPES[dt])


def write_case(case: Case, folder) -> Path:
    """Writes ``case`` to ``folder`` (created; existing files of the same names replaced)."""
    folder = Path(folder)
    if not _NAME.match(case.name.replace("-", "_").replace(".", "_")):
        raise ValueError(f"case name {case.name!r}: letters, digits, '_', '-', '.' only")
    header = {"format": FORMAT, "version": VERSION, "name": case.name, "kernel": case.kernel,
              "precision": case.precision, "params": case.params, "compare": case.compare,
              "meta": case.meta}
    for section in SECTIONS:
        arrays = case.arrays.get(section, {})
        if not arrays:
            continue
        (folder / section).mkdir(parents=True, exist_ok=True)
        entries = {}
        for name, a in arrays.items():
            a = _check_array(section, name, a)
            rel = f"{section}/{name}.bin"
            a.tofile(folder / rel)
            entries[name] = {"dtype": np.dtype(a.dtype).name, "shape": list(a.shape), "file": rel}
        header[section] = entries
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "case.json.tmp"
    tmp.write_text(json.dumps(header, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, folder / "case.json")
    return folder


def read_case(folder, sections=SECTIONS, names=None) -> Case:
    """Reads a case folder; arrays of the given sections are loaded (only those in `names` when
    given; memory-mapped files are not used, so the folder may be deleted afterwards)."""
    folder = Path(folder)
    path = folder / "case.json"
    try:
        header = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{folder}: no case.json (not a case folder)") from None
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise ValueError(f"{path}: not a {FORMAT} v{VERSION} header")
    case = Case(name=header["name"], kernel=header["kernel"], precision=header["precision"],
                params=header.get("params", {}), compare=header.get("compare", {}),
                meta=header.get("meta", {}))
    for section in sections:
        for name, e in header.get(section, {}).items():
            if names is not None and name not in names:
                continue
            if e["dtype"] not in DTYPES:
                raise ValueError(f"{path}: {section}/{name} has unknown dtype {e['dtype']!r}")
            shape = tuple(int(s) for s in e["shape"])
            a = np.fromfile(folder / e["file"], dtype=DTYPES[e["dtype"]])
            if a.size != int(np.prod(shape, dtype=np.int64)):
                raise ValueError(f"{path}: {section}/{name} holds {a.size} values, its shape "
                                 f"{list(shape)} needs {int(np.prod(shape))}")
            case.arrays[section][name] = a.reshape(shape)
    return case


def list_cases(root) -> list[Path]:
    """The case folders directly under ``root`` (sorted by name)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a folder")
    return sorted(p for p in root.iterdir() if (p / "case.json").is_file())
