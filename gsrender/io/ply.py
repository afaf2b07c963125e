"""PLY read/write in the INRIA 3DGS layout.

Layout: x y z nx ny nz f_dc_0..2 f_rest_* opacity scale_0..2 rot_0..3 (float32), optionally followed by
feat_0..feat_{D-1} (float32) and object_id (int32). The file stores raw parameters: opacity is a logit,
scales are logs, rot is a wxyz quaternion; f_rest is channel-major ([channel][coef]).

Files are untrusted: the header is parsed by hand and its element counts and sizes are checked against
the file length before anything is allocated.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gsrender.scene import GaussianModel

# PLY scalar types -> numpy type codes (byte order is added per file).
_PLY_TYPES = {
    "char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1",
    "short": "i2", "int16": "i2", "ushort": "u2", "uint16": "u2",
    "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4",
    "float": "f4", "float32": "f4", "double": "f8", "float64": "f8",
}
_FORMATS = {"binary_little_endian": "<", "binary_big_endian": ">", "ascii": None}
_MAX_HEADER = 1 << 20  # a real header is a few KB even with 1024 feature columns
_MAX_PROPS = 1 << 14
_REST_COUNTS = {0: 0, 9: 1, 24: 2, 45: 3}  # len(f_rest) -> SH degree
_REQUIRED = (["x", "y", "z"] + [f"f_dc_{i}" for i in range(3)] + ["opacity"]
             + [f"scale_{i}" for i in range(3)] + [f"rot_{i}" for i in range(4)])


@dataclass
class _Element:
    name: str
    count: int
    props: list  # [(name, numpy code or None for list properties)]


def _parse_header(path: Path, f) -> tuple[str | None, list[_Element], int]:
    """(byte order or None for ascii, elements, data offset). Reads at most _MAX_HEADER bytes."""
    head = f.read(_MAX_HEADER)
    if not head.startswith(b"ply"):
        raise ValueError(f"{path}: not a PLY file (no 'ply' magic at the start)")
    end = head.find(b"end_header")
    if end < 0:
        raise ValueError(f"{path}: PLY header has no 'end_header' within {_MAX_HEADER} bytes")
    nl = head.find(b"\n", end)
    if nl < 0:
        raise ValueError(f"{path}: truncated PLY header (no newline after 'end_header')")
    try:
        lines = head[:end].decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: PLY header is not ASCII text") from None
    fmt = None
    order = None
    elements: list[_Element] = []
    for ln, raw in enumerate(lines[1:], start=2):
        tok = raw.strip().split()
        if not tok or tok[0] in ("comment", "obj_info"):
            continue
        if tok[0] == "format":
            if len(tok) != 3 or tok[1] not in _FORMATS:
                raise ValueError(f"{path}: unsupported PLY format line {raw.strip()!r} "
                                 f"(expected binary_little_endian, binary_big_endian or ascii)")
            fmt, order = tok[1], _FORMATS[tok[1]]
        elif tok[0] == "element":
            if len(tok) != 3 or not tok[2].isdigit():
                raise ValueError(f"{path}: bad PLY element line {ln}: {raw.strip()!r}")
            elements.append(_Element(tok[1], int(tok[2]), []))
        elif tok[0] == "property":
            if not elements:
                raise ValueError(f"{path}: PLY property before any element (line {ln})")
            props = elements[-1].props
            if len(props) >= _MAX_PROPS:
                raise ValueError(f"{path}: more than {_MAX_PROPS} properties in element "
                                 f"'{elements[-1].name}'")
            if len(tok) == 5 and tok[1] == "list":
                if tok[2] not in _PLY_TYPES or tok[3] not in _PLY_TYPES:
                    raise ValueError(f"{path}: unknown PLY type on line {ln}: {raw.strip()!r}")
                props.append((tok[4], None))
            elif len(tok) == 3 and tok[1] in _PLY_TYPES:
                props.append((tok[2], _PLY_TYPES[tok[1]]))
            else:
                raise ValueError(f"{path}: bad PLY property line {ln}: {raw.strip()!r}")
        else:
            raise ValueError(f"{path}: unexpected PLY header line {ln}: {raw.strip()!r}")
    if fmt is None:
        raise ValueError(f"{path}: PLY header has no 'format' line")
    return order if fmt != "ascii" else None, elements, nl + 1


def _vertex_element(path: Path, elements: list[_Element]) -> tuple[int, _Element]:
    idx = [i for i, e in enumerate(elements) if e.name == "vertex"]
    if not idx:
        raise ValueError(f"{path}: PLY has no 'vertex' element")
    vi = idx[0]
    vert = elements[vi]
    names = [p[0] for p in vert.props]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: duplicate property names in the vertex element")
    if any(code is None for _, code in vert.props):
        raise ValueError(f"{path}: vertex element has list properties; not a 3DGS PLY")
    missing = [n for n in _REQUIRED if n not in names]
    if missing:
        raise ValueError(f"{path}: not a 3DGS PLY: missing vertex properties {missing} "
                         f"(has {names[:12]}{' ...' if len(names) > 12 else ''})")
    if vert.count == 0:
        raise ValueError(f"{path}: PLY has 0 vertices (empty scene)")
    return vi, vert


def _read_binary(path: Path, f, order: str, elements, vi: int, offset: int, file_size: int):
    # Elements before the vertex block must be fixed-size so we can skip them.
    skip = 0
    for e in elements[:vi]:
        if any(code is None for _, code in e.props):
            raise ValueError(f"{path}: element '{e.name}' with list properties precedes 'vertex'")
        skip += e.count * sum(np.dtype(code).itemsize for _, code in e.props)
    vert = elements[vi]
    dtype = np.dtype([(n, order + code) for n, code in vert.props])
    need = skip + vert.count * dtype.itemsize
    have = file_size - offset
    if need > have:
        raise ValueError(
            f"{path}: truncated or corrupt PLY: header declares {vert.count} vertices x "
            f"{dtype.itemsize} bytes (+{skip} bytes of earlier elements) = {need} bytes, "
            f"but only {have} bytes follow the header")
    f.seek(offset + skip)
    buf = f.read(vert.count * dtype.itemsize)
    return np.frombuffer(buf, dtype=dtype, count=vert.count)


def _read_ascii(path: Path, f, elements, vi: int, offset: int, file_size: int):
    vert = elements[vi]
    nprop = len(vert.props)
    # Every value takes at least 2 bytes ("0 "), so the declared count is bounded by the file size.
    if vert.count * nprop * 2 > file_size - offset + 1:
        raise ValueError(f"{path}: truncated or corrupt ASCII PLY: header declares {vert.count} "
                         f"vertices x {nprop} values, more than the {file_size - offset} data bytes hold")
    f.seek(offset)
    lines = f.read().decode("ascii", errors="replace").split("\n")
    lines = [ln for ln in lines if ln.strip()]
    skip = sum(e.count for e in elements[:vi])
    rows = lines[skip:skip + vert.count]
    if len(rows) < vert.count:
        raise ValueError(f"{path}: truncated ASCII PLY: header declares {vert.count} vertices, "
                         f"found {len(rows)} data lines")
    try:
        vals = np.array(" ".join(rows).split(), dtype=np.float64)
    except ValueError:
        raise ValueError(f"{path}: ASCII PLY has non-numeric vertex values") from None
    if vals.size != vert.count * nprop:
        raise ValueError(f"{path}: ASCII PLY vertex lines hold {vals.size} values, "
                         f"expected {vert.count} x {nprop}")
    vals = vals.reshape(vert.count, nprop)
    out = np.empty(vert.count, dtype=np.dtype([(n, code) for n, code in vert.props]))
    for j, (n, _) in enumerate(vert.props):
        out[n] = vals[:, j]
    return out


def _numbered(names: list[str], prefix: str) -> int:
    """How many prefix0..prefix{k-1} columns there are; they must be contiguous from 0."""
    idx = sorted(int(n[len(prefix):]) for n in names
                 if n.startswith(prefix) and n[len(prefix):].isdigit())
    if idx != list(range(len(idx))):
        raise ValueError(f"'{prefix}*' columns are not numbered 0..{len(idx) - 1}: {idx[:10]}...")
    return len(idx)


def _columns(path: Path, data, names: list[str]) -> np.ndarray:
    out = np.stack([np.asarray(data[n], dtype=np.float32) for n in names], axis=1)  # [N, len(names)]
    bad = ~np.isfinite(out).all(axis=0)
    if bad.any():
        raise ValueError(f"{path}: non-finite values in PLY properties "
                         f"{[n for n, b in zip(names, bad) if b]}")
    return out


def load_ply(path: str | os.PathLike) -> GaussianModel:
    """Load an INRIA-layout 3DGS PLY as activated parameters (sigmoid opacity, exp scales)."""
    path = Path(path)
    file_size = path.stat().st_size
    with open(path, "rb") as f:
        order, elements, offset = _parse_header(path, f)
        vi, vert = _vertex_element(path, elements)
        if order is None:
            data = _read_ascii(path, f, elements, vi, offset, file_size)
        else:
            data = _read_binary(path, f, order, elements, vi, offset, file_size)
    names = [p[0] for p in vert.props]
    try:
        n_rest = _numbered(names, "f_rest_")
        n_feat = _numbered(names, "feat_")
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    if n_rest not in _REST_COUNTS:
        raise ValueError(f"{path}: {n_rest} f_rest_* properties; expected 0, 9, 24 or 45 "
                         f"(SH degree 0..3)")
    K = (_REST_COUNTS[n_rest] + 1) ** 2
    n = vert.count

    means = _columns(path, data, ["x", "y", "z"])  # [N, 3]
    dc = _columns(path, data, [f"f_dc_{i}" for i in range(3)])  # [N, 3]
    rest = _columns(path, data, [f"f_rest_{i}" for i in range(n_rest)]) if n_rest else \
        np.zeros((n, 0), np.float32)
    opacity_logit = _columns(path, data, ["opacity"])[:, 0]  # [N]
    log_scales = _columns(path, data, [f"scale_{i}" for i in range(3)])  # [N, 3]
    quats = _columns(path, data, [f"rot_{i}" for i in range(4)])  # [N, 4]
    if log_scales.max() > 80.0:  # exp overflows float32 near 88.7
        raise ValueError(f"{path}: scale_* log-scales up to {log_scales.max():g}; exp() overflows")

    # f_rest is [channel][coef] per Gaussian -> sh[:, 1:, c].
    sh = np.empty((n, K, 3), np.float32)  # [N, K, 3]
    sh[:, 0, :] = dc
    sh[:, 1:, :] = rest.reshape(n, 3, K - 1).transpose(0, 2, 1)

    tiny = np.finfo(np.float32).tiny
    # Activate in float64, then keep the model valid: sigmoid(±large) rounds to 0/1 and exp(-large) to 0
    # in float32. Clamping touches only values the renderer cannot tell apart (alpha caps at 0.99 and
    # Gaussians under 1/255 opacity are culled).
    opac = 1.0 / (1.0 + np.exp(-opacity_logit.astype(np.float64)))
    opac = np.clip(opac, 1e-7, np.nextafter(np.float32(1), np.float32(0))).astype(np.float32)
    scales = np.maximum(np.exp(log_scales.astype(np.float64)), tiny).astype(np.float32)

    features = _columns(path, data, [f"feat_{i}" for i in range(n_feat)]) if n_feat else None
    object_ids = None
    if "object_id" in names:
        ids = np.asarray(data["object_id"])
        if ids.dtype.kind == "f" and (not np.isfinite(ids).all() or (ids != np.round(ids)).any()):
            raise ValueError(f"{path}: object_id holds non-integer values")
        object_ids = torch.from_numpy(ids.astype(np.int64))

    return GaussianModel(
        means=torch.from_numpy(means),
        quats=torch.from_numpy(quats),
        scales=torch.from_numpy(scales),
        opacities=torch.from_numpy(opac),
        sh=torch.from_numpy(sh),
        features=None if features is None else torch.from_numpy(features),
        object_ids=object_ids,
        meta={"source": str(path)},
    )


def _np(t: torch.Tensor, name: str, shape: tuple) -> np.ndarray:
    a = t.detach().to("cpu", torch.float64).numpy()
    if a.shape[:len(shape)] != shape or a.ndim != len(shape):
        raise ValueError(f"model.{name}: expected shape {list(shape)}, got {list(a.shape)}")
    if not np.isfinite(a).all():
        raise ValueError(f"model.{name}: non-finite values")
    return a


def save_ply(path: str | os.PathLike, model: GaussianModel) -> None:
    """Write model in the INRIA layout (readable by the original 3DGS code and viewers).

    A model without features/object_ids gets exactly the INRIA layout; feat_* and object_id columns are
    appended after rot_3 when present.
    """
    path = Path(path)
    n = model.num_gaussians
    if n == 0:
        raise ValueError("model: has 0 Gaussians")
    K = int(model.sh.shape[1]) if model.sh.ndim == 3 else -1
    if K not in (1, 4, 9, 16):
        raise ValueError(f"model.sh: expected [N, K, 3] with K in 1, 4, 9, 16, got {list(model.sh.shape)}")
    means = _np(model.means, "means", (n, 3))
    quats = _np(model.quats, "quats", (n, 4))
    scales = _np(model.scales, "scales", (n, 3))
    opac = _np(model.opacities, "opacities", (n,))
    sh = _np(model.sh, "sh", (n, K, 3))
    if (scales <= 0).any():
        raise ValueError("model.scales: must be positive (the PLY stores their logs)")
    if ((opac <= 0) | (opac >= 1)).any():
        raise ValueError("model.opacities: must lie in the open interval (0, 1) (the PLY stores logits)")

    cols: list[tuple[str, str, np.ndarray]] = []
    cols += [(c, "f4", means[:, i]) for i, c in enumerate("xyz")]
    cols += [(c, "f4", np.zeros(n)) for c in ("nx", "ny", "nz")]
    cols += [(f"f_dc_{c}", "f4", sh[:, 0, c]) for c in range(3)]
    rest = sh[:, 1:, :].transpose(0, 2, 1).reshape(n, -1)  # [N, 3*(K-1)] channel-major
    cols += [(f"f_rest_{i}", "f4", rest[:, i]) for i in range(rest.shape[1])]
    cols += [("opacity", "f4", np.log(opac) - np.log1p(-opac))]
    cols += [(f"scale_{i}", "f4", np.log(scales[:, i])) for i in range(3)]
    cols += [(f"rot_{i}", "f4", quats[:, i]) for i in range(4)]
    if model.features is not None:
        if model.features.ndim != 2 or model.features.shape[0] != n:
            raise ValueError(f"model.features: expected [N, D] with N={n}, got {list(model.features.shape)}")
        feats = _np(model.features, "features", tuple(model.features.shape))
        cols += [(f"feat_{i}", "f4", feats[:, i]) for i in range(feats.shape[1])]
    if model.object_ids is not None:
        ids = model.object_ids.detach().cpu().to(torch.int64).numpy()
        if ids.shape != (n,):
            raise ValueError(f"model.object_ids: expected shape [{n}], got {list(ids.shape)}")
        if ids.min() < -2**31 or ids.max() >= 2**31:
            raise ValueError("model.object_ids: values must fit in int32 (the PLY 'int' type)")
        cols += [("object_id", "i4", ids)]

    dtype = np.dtype([(name, "<" + code) for name, code, _ in cols])
    rec = np.empty(n, dtype=dtype)
    for name, _, vals in cols:
        rec[name] = vals
    ply_type = {"f4": "float", "i4": "int"}
    header = ["ply", "format binary_little_endian 1.0", f"element vertex {n}"]
    header += [f"property {ply_type[code]} {name}" for name, code, _ in cols]
    header += ["end_header"]
    with open(path, "wb") as f:
        f.write(("\n".join(header) + "\n").encode("ascii"))
        f.write(rec.tobytes())
