"""The localization map file: one .npz (no pickle) with the map points, their descriptors and
bookkeeping. Loading checks every array's dtype and shape before use (files are untrusted)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from gsrender.loc.lift import LiftedMap

FORMAT = "gsrender.loc.map/1"


def save_map(path, m: LiftedMap, meta: dict | None = None) -> None:
    """Writes the map (with its retrieval index when it has one); meta (JSON-serialisable) is
    stored as a JSON string."""
    extra = {}
    if m.point_views is not None and m.view_descriptors is not None and m.codebook is not None:
        extra = {"point_views": np.asarray(m.point_views, np.uint8),
                 "view_descriptors": m.view_descriptors.numpy().astype(np.float32),
                 "codebook": m.codebook.numpy().astype(np.float32)}
    with open(Path(path), "wb") as f:  # a file object: np.savez would append ".npz" to names
        np.savez(f, format=np.array(FORMAT), points=m.points.numpy().astype(np.float32),
                 descriptors=m.descriptors.numpy().astype(np.float32),
                 gaussian_ids=m.gaussian_ids.numpy().astype(np.int64),
                 consistency=m.consistency.numpy().astype(np.float32),
                 n_obs=m.n_obs.numpy().astype(np.int64), meta=np.array(json.dumps(meta or {})),
                 **extra)


def load_map(path) -> tuple[LiftedMap, dict]:
    """-> (LiftedMap, meta). Raises ValueError on a file that is not a well-formed map."""
    try:
        z = np.load(Path(path), allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"path: {path} is not a readable .npz map ({e})") from e
    with z:
        need = ("format", "points", "descriptors", "gaussian_ids", "consistency", "n_obs", "meta")
        missing = [k for k in need if k not in z.files]
        if missing:
            raise ValueError(f"path: {path} lacks {missing}; not a gsrender localization map")
        if str(z["format"]) != FORMAT:
            raise ValueError(f"path: {path} has format {str(z['format'])!r}, expected {FORMAT!r}")
        pts, desc = z["points"], z["descriptors"]
        M = pts.shape[0] if pts.ndim == 2 else -1
        ok = (pts.ndim == 2 and pts.shape[1] == 3 and pts.dtype == np.float32
              and desc.ndim == 2 and desc.shape[0] == M and desc.dtype == np.float32
              and all(z[k].shape == (M,) for k in ("gaussian_ids", "consistency", "n_obs")))
        if not ok:
            raise ValueError(f"path: {path} holds arrays of inconsistent shapes or dtypes")
        if not (np.isfinite(pts).all() and np.isfinite(desc).all()):
            raise ValueError(f"path: {path} holds NaN or Inf")
        m = LiftedMap(points=torch.from_numpy(pts.copy()), descriptors=torch.from_numpy(desc.copy()),
                      gaussian_ids=torch.from_numpy(z["gaussian_ids"].astype(np.int64)),
                      consistency=torch.from_numpy(z["consistency"].astype(np.float32)),
                      n_obs=torch.from_numpy(z["n_obs"].astype(np.int64)))
        if all(k in z.files for k in ("point_views", "view_descriptors", "codebook")):
            pv, vd, cb = z["point_views"], z["view_descriptors"], z["codebook"]
            C = vd.shape[0] if vd.ndim == 2 else -1
            if not (pv.dtype == np.uint8 and pv.shape == (M, (C + 7) // 8) and
                    vd.dtype == np.float32 and cb.dtype == np.float32 and cb.ndim == 2 and
                    vd.shape[1] == cb.size and cb.shape[1] == desc.shape[1]):
                raise ValueError(f"path: {path} has a malformed retrieval index")
            m.point_views, m.view_descriptors = pv.copy(), torch.from_numpy(vd.copy())
            m.codebook = torch.from_numpy(cb.copy())
        try:
            meta = json.loads(str(z["meta"]))
        except json.JSONDecodeError as e:
            raise ValueError(f"path: {path} has a malformed meta block") from e
    return m, meta
