"""Camera lists stored as JSON (the snowmiku_small `cameras_small.json` layout).

{"frames": [{"file": "images/x.jpg", "width": W, "height": H, "K": [[...]] (3x3),
             "viewmat_w2c_opencv": [[...]] (4x4)}, ...]}; file is relative to the JSON's folder.
"""
from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

import numpy as np
import torch

from gsrender.io.cameras import Camera
from gsrender.io.paths import safe_join

_MAX_JSON = 256 << 20


def _matrix(path: Path, i: int, frame: dict, key: str, shape: tuple) -> torch.Tensor:
    try:
        a = np.asarray(frame[key], dtype=np.float64)
    except KeyError:
        raise ValueError(f"{path}: frame {i} has no '{key}'") from None
    except (TypeError, ValueError):
        raise ValueError(f"{path}: frame {i} '{key}' is not a numeric matrix") from None
    if a.shape != shape or not np.isfinite(a).all():
        raise ValueError(f"{path}: frame {i} '{key}' must be a finite {shape[0]}x{shape[1]} matrix")
    return torch.from_numpy(a).float()


def load_cameras_json(path: str | os.PathLike, images_dir: str | os.PathLike | None = None) -> list[Camera]:
    """Cameras in file order, named by the image file's base name (as COLMAP names them).

    image_path is images_dir/<base name> when images_dir is given, else <json folder>/<file>.
    """
    path = Path(path)
    if path.stat().st_size > _MAX_JSON:
        raise ValueError(f"{path}: camera JSON larger than {_MAX_JSON >> 20} MiB")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    frames = data.get("frames") if isinstance(data, dict) else None
    if not isinstance(frames, list) or not frames:
        raise ValueError(f"{path}: expected an object with a non-empty 'frames' list")
    cams = []
    for i, fr in enumerate(frames):
        if not isinstance(fr, dict) or not isinstance(fr.get("file"), str):
            raise ValueError(f"{path}: frame {i} has no 'file' string")  # noqa: TRY004 (bad file content)
        w, h = fr.get("width"), fr.get("height")
        if not isinstance(w, int) or not isinstance(h, int) or w <= 0 or h <= 0:
            raise ValueError(f"{path}: frame {i} needs positive integer 'width' and 'height'")
        K = _matrix(path, i, fr, "K", (3, 3))
        vm = _matrix(path, i, fr, "viewmat_w2c_opencv", (4, 4))
        if not torch.allclose(vm[3], torch.tensor([0.0, 0.0, 0.0, 1.0])):
            raise ValueError(f"{path}: frame {i} viewmat's last row is not [0, 0, 0, 1]")
        file = fr["file"]
        name = PurePosixPath(file.replace("\\", "/")).name
        image_path = safe_join(path.parent, file, "file") if images_dir is None else \
            safe_join(images_dir, name, "file")
        cams.append(Camera(name=name, width=w, height=h, K=K, viewmat=vm, image_path=image_path))
    return cams
