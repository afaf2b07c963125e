"""Camera JSON in and out, beside the Camera record (gsrender/io/cameras.py).

One reader, read_cameras_json, for every command and API (load_cameras_json gives Cameras,
gsrender.loc.datasets.load_intrinsics_json localization queries); two layouts:
  {"frames": [{"file": "images/x.jpg", "width": W, "height": H, "K": 3x3,
               "viewmat_w2c_opencv": 4x4}, ...]}        (snowmiku_small's cameras_small.json)
  [{"name": "cam_000", "width": W, "height": H, "K": 3x3, "viewmat_w2c_opencv": 4x4}, ...]
                                                         (data/sample/cameras.json, cameras_to_json)
An entry may name its lens, "camera_model": "pinhole" (the default), "ortho" or "fisheye"
(docs/cameras.md), and give its distortion coefficients in gsplat's layout, "radial_coeffs"
(pinhole k1..k6, fisheye k1..k4), "tangential_coeffs" (p1 p2), "thin_prism_coeffs" (s1..s4);
the writer writes the model when it is not pinhole and the coefficients when they are not zero.
A frame's "file" is relative to the JSON's folder and names the camera by its base name (as COLMAP
does); without one, "name" does (default cam_<i>).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
import torch

from gsrender.contract import CAMERA_MODELS
from gsrender.distortion import COEFFICIENTS
from gsrender.io.cameras import Camera, lens_arguments, stack_cameras
from gsrender.io.paths import safe_join

_MAX_JSON = 256 << 20


def _matrix(path: Path, i: int, entry: dict, key: str, shape: tuple) -> np.ndarray:
    try:
        a = np.asarray(entry[key], dtype=np.float64)
    except KeyError:
        raise ValueError(f"{path}: camera {i} has no '{key}'") from None
    except (TypeError, ValueError):
        raise ValueError(f"{path}: camera {i} '{key}' is not a numeric matrix") from None
    if a.shape != shape or not np.isfinite(a).all():
        raise ValueError(f"{path}: camera {i} '{key}' must be a finite {shape[0]}x{shape[1]} matrix")
    return a


def _distortion(path: Path, i: int, e: dict, model: str) -> dict:
    """An entry's distortion coefficients ({name: [floats]}), checked against its lens model."""
    out = {}
    for name in ("radial_coeffs", "tangential_coeffs", "thin_prism_coeffs"):
        if name not in e:
            continue
        width = COEFFICIENTS[model].get(name)
        if width is None:
            raise ValueError(f"{path}: camera {i} ({model}) takes no {name!r}")
        v = e[name]
        if not (isinstance(v, list) and len(v) == width and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)):
            raise ValueError(f"{path}: camera {i} {name!r} must be a list of {width} finite numbers")
        out[name] = [float(x) for x in v]
    return out


@dataclass
class CameraEntry:
    """One camera of a camera JSON as read, in float64: K [3,3], viewmat [4,4] world-to-camera
    (None when the file has none and read_cameras_json was told the pose is optional), the lens
    model and its distortion coefficients ({name: list of floats}, Camera.distortion's keys)."""

    name: str
    width: int
    height: int
    K: np.ndarray
    viewmat: np.ndarray | None
    image_path: Path | None
    model: str = "pinhole"
    distortion: dict = field(default_factory=dict)


def read_cameras_json(path: str | os.PathLike, images_dir: str | os.PathLike | None = None, *,
                      pose_required: bool = True) -> list[CameraEntry]:
    """The one camera-JSON reader: entries in file order from either layout (module docstring).

    image_path: images_dir/<name> when images_dir is given, else <json folder>/<file> for entries
    with a "file", else None (neither may leave its folder). pose_required=False accepts entries
    without "viewmat_w2c_opencv" (localization queries: intrinsics only). Bad files raise
    ValueError naming the file and the camera.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"cameras JSON: no such file {str(path)!r}")
    if path.stat().st_size > _MAX_JSON:
        raise ValueError(f"{path}: camera JSON larger than {_MAX_JSON >> 20} MiB")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    entries = data.get("frames") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{path}: expected a non-empty list of cameras or an object with a non-empty "
                         f"'frames' list")
    out = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError(f"{path}: camera {i} is not an object")  # noqa: TRY004 (bad file content)
        file = e.get("file")
        if file is not None and not isinstance(file, str):
            raise ValueError(f"{path}: camera {i} 'file' is not a string")
        w, h = e.get("width"), e.get("height")
        if isinstance(w, bool) or isinstance(h, bool) or not isinstance(w, int) or not isinstance(h, int) \
                or w <= 0 or h <= 0:
            raise ValueError(f"{path}: camera {i} needs positive integer 'width' and 'height'")
        K = _matrix(path, i, e, "K", (3, 3))
        vm = None
        if pose_required or "viewmat_w2c_opencv" in e:
            vm = _matrix(path, i, e, "viewmat_w2c_opencv", (4, 4))
            if not np.allclose(vm[3], [0.0, 0.0, 0.0, 1.0]):
                raise ValueError(f"{path}: camera {i} viewmat's last row is not [0, 0, 0, 1]")
        model = e.get("camera_model", "pinhole")
        if model not in CAMERA_MODELS:
            raise ValueError(f"{path}: camera {i} 'camera_model' must be one of {CAMERA_MODELS}, "
                             f"got {model!r}")
        name = PurePosixPath(file.replace("\\", "/")).name if file else str(e.get("name", f"cam_{i:03d}"))
        if images_dir is not None:
            image_path = safe_join(images_dir, name, "file")
        else:
            image_path = safe_join(path.parent, file, "file") if file else None
        out.append(CameraEntry(name, w, h, K, vm, image_path, model, _distortion(path, i, e, model)))
    return out


def load_cameras_json(path: str | os.PathLike, images_dir: str | os.PathLike | None = None) -> list[Camera]:
    """read_cameras_json's entries (every one with a pose) as Cameras (float32 K and viewmat)."""
    return [Camera(name=e.name, width=e.width, height=e.height, K=torch.from_numpy(e.K).float(),
                   viewmat=torch.from_numpy(e.viewmat).float(), image_path=e.image_path,
                   model=e.model, distortion=e.distortion)
            for e in read_cameras_json(path, images_dir)]


def cameras_from_json(path) -> tuple[torch.Tensor, torch.Tensor, int, int, list[str]]:
    """load_cameras_json as tensors: (viewmats [C,4,4], Ks [C,3,3], width, height, names).
    All cameras must share one image size."""
    cams = load_cameras_json(path)
    vms, ks, width, height = stack_cameras(cams)
    return vms, ks, width, height, [c.name for c in cams]


def cameras_to_json(viewmats: torch.Tensor, Ks: torch.Tensor, width: int, height: int,
                    names: list[str] | None = None, camera_model: str = "pinhole",
                    distortion: dict | None = None) -> str:
    """The list layout: [{name, width, height, K, viewmat_w2c_opencv}, ...] (as
    ../shared/data/snowmiku_small/cameras_small.json's frames, without image files), with
    "camera_model" in every entry when it is not pinhole. distortion: {name: [C, width]} (gsplat's
    coefficient tensors, e.g. io.lens_arguments'), written per entry where not all zero."""
    vms = torch.as_tensor(viewmats).reshape(-1, 4, 4).double()
    ks = torch.as_tensor(Ks).reshape(-1, 3, 3).double()
    names = names or [f"cam_{i:03d}" for i in range(vms.shape[0])]
    out = [{"name": nm, "width": int(width), "height": int(height),
            "K": [[round(v, 6) + 0.0 for v in row] for row in k.tolist()],  # + 0.0: no "-0.0" in the JSON
            "viewmat_w2c_opencv": [[round(v, 8) + 0.0 for v in row] for row in vm.tolist()]}
           for nm, k, vm in zip(names, ks, vms)]
    if camera_model != "pinhole":
        for e in out:
            e["camera_model"] = camera_model
    for name, coeffs in (distortion or {}).items():
        for e, c in zip(out, torch.as_tensor(coeffs).double().reshape(len(out), -1).tolist(),
                        strict=True):
            if any(c):
                e[name] = c
    return json.dumps(out, indent=1)


def save_cameras_json(path: str | os.PathLike, cams: list[Camera]) -> None:
    """Writes Cameras (one image size) in the list layout; load_cameras_json reads them back."""
    vms, ks, width, height = stack_cameras(cams)
    lens = lens_arguments([c.distortion for c in cams])
    lens.pop("with_ut", None)
    Path(path).write_text(cameras_to_json(vms, ks, width, height, [c.name for c in cams],
                                          cams[0].model, lens) + "\n", encoding="utf-8")
