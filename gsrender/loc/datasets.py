"""Query/training image lists for localization in the layouts users have on disk. Every loader
returns LocImage records: image path, intrinsics, size, and the ground-truth world-to-camera pose
when the layout has one (None for intrinsics-only queries).

- intrinsics JSON: the camera JSON of gsrender.cameras (a list, or {"frames": [...]}, of {"file",
  "width", "height", "K"}) with "viewmat_w2c_opencv" optional; paths relative to the JSON file
  or images_dir;
- 7-Scenes: <root>/{TrainSplit,TestSplit}.txt list sequences ("sequence2" -> seq-02/), each
  with frame-XXXXXX.color.png and frame-XXXXXX.pose.txt (4×4 camera-to-world); the RGB camera
  is 640×480 with focal 525 px and the principal point at the centre (the dataset's nominal
  calibration; pass your own focal if you have one);
- Cambridge Landmarks: <root>/dataset_{train,test}.txt, three header lines, then
  "seqN/frameXXXXX.png X Y Z W P Q R": the camera centre and the world-to-camera rotation as a
  wxyz quaternion (VisualSFM/NVM convention); images 1920×1080 (or whatever is on disk, read
  from the file), focal given by the caller (the dataset ships it only in its .nvm model).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gsrender.io.camera_json import read_cameras_json

SEVEN_SCENES_FOCAL = 525.0


@dataclass
class LocImage:
    name: str
    image_path: Path | None  # None: the JSON gave no file and no images folder was given
    K: np.ndarray  # [3,3] float64, gsrender pixel convention (centre of pixel (0,0) at 0.5)
    width: int
    height: int
    viewmat: np.ndarray | None = None  # [4,4] world-to-camera (OpenCV axes) when known


def _K(fx, fy, cx, cy) -> np.ndarray:
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def _quat_wxyz_to_rotmat(q) -> np.ndarray:
    w, x, y, z = np.asarray(q, np.float64) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def load_intrinsics_json(path, images_dir=None) -> list[LocImage]:
    """Query images with intrinsics only, from a camera JSON (gsrender.io.camera_json.read_cameras_json,
    the reader every command uses) whose entries may omit the pose; one given is kept for error
    reporting."""
    return [LocImage(e.name, e.image_path, e.K, e.width, e.height, e.viewmat)
            for e in read_cameras_json(path, images_dir, pose_required=False)]


def load_7scenes(root, split: str = "test", focal: float = SEVEN_SCENES_FOCAL) -> list[LocImage]:
    root = Path(root)
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    listing = root / ("TrainSplit.txt" if split == "train" else "TestSplit.txt")
    if not listing.is_file():
        raise ValueError(f"root: {listing} not found (not a 7-Scenes scene folder)")
    out = []
    for line in listing.read_text().split():
        digits = "".join(ch for ch in line if ch.isdigit())
        if not digits:
            raise ValueError(f"root: {listing} lists {line!r}, expected 'sequenceN'")
        seq = root / f"seq-{int(digits):02d}"
        for img in sorted(seq.glob("frame-*.color.png")):
            pose = img.with_name(img.name.replace(".color.png", ".pose.txt"))
            c2w = np.loadtxt(pose).reshape(4, 4)
            out.append(LocImage(f"{seq.name}/{img.name}", img, _K(focal, focal, 320.0, 240.0),
                                640, 480, np.linalg.inv(c2w)))
    if not out:
        raise ValueError(f"root: no frame-*.color.png under the sequences of {listing}")
    return out


def load_cambridge(root, split: str = "test", focal: float | None = None) -> list[LocImage]:
    """focal: in pixels of the image on disk (None: 0.87 × width, about the dataset's phone
    camera; use the .nvm model's focal for accurate poses)."""
    root = Path(root)
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    listing = root / f"dataset_{split}.txt"
    if not listing.is_file():
        raise ValueError(f"root: {listing} not found (not a Cambridge Landmarks scene folder)")
    import imageio.v3 as iio

    out = []
    for n, line in enumerate(listing.read_text().splitlines()[3:], start=4):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 8:
            raise ValueError(f"root: {listing} line {n}: expected 'file X Y Z W P Q R'")
        c, q = np.array(parts[1:4], np.float64), np.array(parts[4:8], np.float64)
        R = _quat_wxyz_to_rotmat(q)
        vm = np.eye(4)
        vm[:3, :3], vm[:3, 3] = R, -R @ c
        img = root / parts[0]
        h, w = iio.improps(img).shape[:2]
        f = 0.87 * w if focal is None else float(focal)
        out.append(LocImage(parts[0], img, _K(f, f, w / 2, h / 2), w, h, vm))
    return out
