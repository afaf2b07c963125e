"""PLY read/write in the INRIA 3DGS layout, through plyfile.

Layout: x y z nx ny nz f_dc_0..2 f_rest_* opacity scale_0..2 rot_0..3 (float32), optionally followed by
feat_0..feat_{D-1} (float32) and object_id (int32). The file stores raw parameters: opacity is a logit,
scales are logs, rot is a wxyz quaternion; f_rest is channel-major ([channel][coef]).

Files are untrusted, and plyfile allocates an element's declared row count before it reads a row. So
the header is read first, at most _MAX_HEADER bytes of it, and parsed by plyfile alone; the vertex
element's properties and every element's declared rows (times the fewest bytes a row can take) are
checked against the file length; only then does plyfile read the data (binary: memory-mapped).
Non-finite values and shapes are checked after.
"""
from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import plyfile
import torch

from gsrender.io.atomic import atomic_path
from gsrender.scene import GaussianModel

_MAX_HEADER = 1 << 20  # a real header is a few KB even with 1024 feature columns
_MAX_PROPS = 1 << 14
_REST_COUNTS = {0: 0, 9: 1, 24: 2, 45: 3}  # len(f_rest) -> SH degree
_REQUIRED = (["x", "y", "z"] + [f"f_dc_{i}" for i in range(3)] + ["opacity"]
             + [f"scale_{i}" for i in range(3)] + [f"rot_{i}" for i in range(4)])


def _read_header(path: Path, f) -> tuple[plyfile.PlyData, int]:
    """(the header as a PlyData without data, data offset). Reads at most _MAX_HEADER bytes."""
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
        # plyfile's own header parser (the one PlyData.read runs first), on the header bytes only:
        # it allocates no data.
        header = plyfile.PlyData._parse_header(io.BytesIO(head[:nl + 1]))
    except (plyfile.PlyParseError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: bad PLY header: {e}") from None
    for e in header.elements:
        if e.count < 0:
            raise ValueError(f"{path}: PLY element '{e.name}' declares {e.count} rows")
        if len(e.properties) > _MAX_PROPS:
            raise ValueError(f"{path}: more than {_MAX_PROPS} properties in element '{e.name}'")
    return header, nl + 1


def _vertex_element(path: Path, header: plyfile.PlyData) -> plyfile.PlyElement:
    vertices = [e for e in header.elements if e.name == "vertex"]
    if not vertices:
        raise ValueError(f"{path}: PLY has no 'vertex' element")
    vert = vertices[0]
    names = [p.name for p in vert.properties]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: duplicate property names in the vertex element")
    if any(isinstance(p, plyfile.PlyListProperty) for p in vert.properties):
        raise ValueError(f"{path}: vertex element has list properties; not a 3DGS PLY")
    missing = [n for n in _REQUIRED if n not in names]
    if missing:
        raise ValueError(f"{path}: not a 3DGS PLY: missing vertex properties {missing} "
                         f"(has {names[:12]}{' ...' if len(names) > 12 else ''})")
    if vert.count == 0:
        raise ValueError(f"{path}: PLY has 0 vertices (empty scene)")
    return vert


def _min_row_bytes(element: plyfile.PlyElement, text: bool) -> int:
    """The fewest bytes one row can take: an empty list is its length alone; a text value is "0 "."""
    if text:
        return 2 * len(element.properties)
    return sum(np.dtype(p.list_dtype()[0] if isinstance(p, plyfile.PlyListProperty)
                        else p.val_dtype).itemsize for p in element.properties)


def _check_counts(path: Path, header: plyfile.PlyData, data_bytes: int) -> None:
    """Every declared row must fit in the bytes after the header, before plyfile allocates them."""
    rows = [(e, _min_row_bytes(e, header.text)) for e in header.elements]
    need = sum(e.count * size for e, size in rows)
    if need > data_bytes + header.text:  # a text file may lack its last newline
        declared = ", ".join(f"{e.count} {'vertices' if e.name == 'vertex' else repr(e.name) + ' rows'}"
                             f" x {size} bytes" for e, size in rows)
        raise ValueError(f"{path}: truncated or corrupt PLY: the header declares {declared} "
                         f"= {need} bytes at least, but only {data_bytes} bytes follow the header")


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
        header, offset = _read_header(path, f)
        vert = _vertex_element(path, header)
        _check_counts(path, header, file_size - offset)
        f.seek(0)
        try:
            data = plyfile.PlyData.read(f)["vertex"].data
        except plyfile.PlyParseError as e:
            raise ValueError(f"{path}: corrupt PLY data: {e}") from None
    names = [p.name for p in vert.properties]
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

    rec = np.empty(n, dtype=[(name, "<" + code) for name, code, _ in cols])
    for name, _, vals in cols:
        rec[name] = vals
    with atomic_path(path) as tmp:
        plyfile.PlyData([plyfile.PlyElement.describe(rec, "vertex")], byte_order="<").write(str(tmp))
