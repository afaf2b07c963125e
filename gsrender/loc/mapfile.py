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
    """Writes the map; meta (JSON-serialisable) is stored as a JSON string."""
    with open(Path(path), "wb") as f:  # a file object: np.savez would append ".npz" to names
        np.savez(f, format=np.array(FORMAT), points=m.points.numpy().astype(np.float32),
                 descriptors=m.descriptors.numpy().astype(np.float32),
                 gaussian_ids=m.gaussian_ids.numpy().astype(np.int64),
                 consistency=m.consistency.numpy().astype(np.float32),
                 n_obs=m.n_obs.numpy().astype(np.int64), meta=np.array(json.dumps(meta or {})))


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
        try:
            meta = json.loads(str(z["meta"]))
        except json.JSONDecodeError as e:
            raise ValueError(f"path: {path} has a malformed meta block") from e
    return m, meta
