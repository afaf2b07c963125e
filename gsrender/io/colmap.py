"""COLMAP sparse models (cameras, images, points3D) in .bin and .txt.

Cameras: SIMPLE_PINHOLE, PINHOLE, SIMPLE_RADIAL, RADIAL, OPENCV and FULL_OPENCV load as pinhole
cameras, OPENCV_FISHEYE as a fisheye (equidistant) one (docs/cameras.md), with their non-zero
distortion coefficients in gsplat's layout (Camera.distortion; rendered through the unscented
transform). The writers write a pinhole as PINHOLE, OPENCV (k1 k2 p1 p2) or FULL_OPENCV (k3..k6
too) and a fisheye as OPENCV_FISHEYE.

COLMAP stores per image the world-to-camera rotation as a wxyz quaternion (qvec) and the
world-to-camera translation (tvec), in OpenCV axes: exactly our viewmat. Binary files are untrusted:
every count is checked against the bytes that are left before anything is allocated.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gsrender.distortion import COEFFICIENTS
from gsrender.io.cameras import Camera
from gsrender.io.paths import safe_join

# model id -> (name, number of params), as in COLMAP's camera_models.h.
CAMERA_MODELS = {
    0: ("SIMPLE_PINHOLE", 3), 1: ("PINHOLE", 4), 2: ("SIMPLE_RADIAL", 4), 3: ("RADIAL", 5),
    4: ("OPENCV", 8), 5: ("OPENCV_FISHEYE", 8), 6: ("FULL_OPENCV", 12), 7: ("FOV", 5),
    8: ("SIMPLE_RADIAL_FISHEYE", 4), 9: ("RADIAL_FISHEYE", 5), 10: ("THIN_PRISM_FISHEYE", 12),
    11: ("RAD_TAN_THIN_PRISM_FISHEYE", 16),
}
_MODEL_IDS = {name: (mid, npar) for mid, (name, npar) in CAMERA_MODELS.items()}
# model name -> (gsrender lens, whether fx and fy are separate params, number of distortion params
# after fx [fy] cx cy); the models gsrender loads. Their coefficients in gsplat's layout: _GSPLAT.
_LENSES = {
    "SIMPLE_PINHOLE": ("pinhole", False, 0), "PINHOLE": ("pinhole", True, 0),
    "SIMPLE_RADIAL": ("pinhole", False, 1), "RADIAL": ("pinhole", False, 2),
    "OPENCV": ("pinhole", True, 4), "FULL_OPENCV": ("pinhole", True, 8),
    "OPENCV_FISHEYE": ("fisheye", True, 4),
}
# model name -> where each of its distortion params goes: (gsplat coefficient, index), in COLMAP's
# order (camera_models.h: SIMPLE_RADIAL k; RADIAL k1 k2; OPENCV k1 k2 p1 p2; FULL_OPENCV k1 k2 p1
# p2 k3 k4 k5 k6; OPENCV_FISHEYE k1 k2 k3 k4)
_R, _T = "radial_coeffs", "tangential_coeffs"
_GSPLAT = {
    "SIMPLE_PINHOLE": (), "PINHOLE": (), "SIMPLE_RADIAL": ((_R, 0),), "RADIAL": ((_R, 0), (_R, 1)),
    "OPENCV": ((_R, 0), (_R, 1), (_T, 0), (_T, 1)),
    "FULL_OPENCV": ((_R, 0), (_R, 1), (_T, 0), (_T, 1), (_R, 2), (_R, 3), (_R, 4), (_R, 5)),
    "OPENCV_FISHEYE": ((_R, 0), (_R, 1), (_R, 2), (_R, 3)),
}


@dataclass
class ColmapCamera:
    id: int
    model: str
    width: int
    height: int
    params: np.ndarray  # float64, COLMAP's order: f or fx fy, cx, cy, distortion coefficients

    @property
    def lens(self) -> str:
        """gsrender's camera model: "pinhole" or "fisheye"."""
        return _LENSES[self.model][0]

    def distortion(self) -> np.ndarray:
        """The distortion coefficients after the intrinsics."""
        _, two_focal, n = _LENSES[self.model]
        return self.params[4 if two_focal else 3:][:n]

    def lens_distortion(self) -> dict:
        """The non-zero distortion coefficients in gsplat's layout (Camera.distortion): {} for
        none, else every coefficient tensor the model fills (float32)."""
        coeffs = self.distortion()
        if not (coeffs != 0).any():
            return {}
        widths = COEFFICIENTS[self.lens]
        out = {name: torch.zeros(widths[name]) for name, _ in _GSPLAT[self.model]}
        for (name, i), v in zip(_GSPLAT[self.model], coeffs, strict=True):
            out[name][i] = float(v)
        return out

    def K(self) -> np.ndarray:
        """[3, 3] float64 intrinsics."""
        if _LENSES[self.model][1]:
            fx, fy, cx, cy = self.params[:4]
        else:
            fx, cx, cy = self.params[:3]
            fy = fx
        return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


@dataclass
class ColmapImage:
    id: int
    qvec: np.ndarray  # [4] float64 wxyz, world-to-camera rotation
    tvec: np.ndarray  # [3] float64 world-to-camera translation
    camera_id: int
    name: str

    def viewmat(self) -> np.ndarray:
        """[4, 4] float64 world-to-camera matrix."""
        m = np.eye(4)
        m[:3, :3] = qvec_to_rotmat(self.qvec)
        m[:3, 3] = self.tvec
        return m


def qvec_to_rotmat(q) -> np.ndarray:
    w, x, y, z = np.asarray(q, np.float64) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def rotmat_to_qvec(R) -> np.ndarray:
    """wxyz unit quaternion (w >= 0) of a rotation matrix; branches on the largest diagonal term
    so the square root never sees a small argument."""
    R = np.asarray(R, np.float64)
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    if tr > 0:
        s = 2.0 * np.sqrt(tr + 1.0)
        q = [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    elif R[0, 0] >= R[1, 1] and R[0, 0] >= R[2, 2]:
        s = 2.0 * np.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        q = [(R[2, 1] - R[1, 2]) / s, 0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s]
    elif R[1, 1] >= R[2, 2]:
        s = 2.0 * np.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        q = [(R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s]
    else:
        s = 2.0 * np.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        q = [(R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s]
    q = np.array(q)
    q /= np.linalg.norm(q)
    return -q if q[0] < 0 else q


_UNDISTORT = ("Undistort the images first, e.g. `colmap image_undistorter --image_path images "
              "--input_path sparse/0 --output_path undistorted --output_type COLMAP`")


def _check_camera(path: Path, cam: ColmapCamera) -> ColmapCamera:
    if cam.model not in _LENSES:
        raise ValueError(f"{path}: camera {cam.id} uses the model {cam.model}; gsrender loads "
                         f"{', '.join(_LENSES)}. {_UNDISTORT}")
    if cam.width <= 0 or cam.height <= 0 or not np.isfinite(cam.params).all() or \
            (cam.params[:2 if _LENSES[cam.model][1] else 1] <= 0).any():
        raise ValueError(f"{path}: camera {cam.id} has invalid size or intrinsics "
                         f"({cam.width}x{cam.height}, params {cam.params.tolist()})")
    return cam


def _check_image(path: Path, img: ColmapImage) -> ColmapImage:
    if not (np.isfinite(img.qvec).all() and np.isfinite(img.tvec).all()) or \
            np.linalg.norm(img.qvec) == 0:
        raise ValueError(f"{path}: image {img.id} ({img.name!r}) has an invalid pose")
    return img


# ----------------------------------------------------------------------------------------- binary


class _Reader:
    """Bounds-checked little-endian reads from an in-memory file."""

    def __init__(self, path: Path):
        self.path = path
        self.buf = path.read_bytes()
        self.pos = 0

    def left(self) -> int:
        return len(self.buf) - self.pos

    def need(self, nbytes: int, what: str):
        if nbytes > self.left():
            raise ValueError(f"{self.path}: truncated or corrupt COLMAP file: {what} needs {nbytes} bytes "
                             f"at offset {self.pos}, only {self.left()} left")

    def read(self, fmt: str, what: str):
        size = struct.calcsize("<" + fmt)
        self.need(size, what)
        out = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += size
        return out

    def count(self, min_record: int, what: str) -> int:
        (n,) = self.read("Q", f"{what} count")
        if n * min_record > self.left():
            raise ValueError(f"{self.path}: corrupt COLMAP file: {n} {what} declared (at least "
                             f"{min_record} bytes each) but only {self.left()} bytes follow")
        return n

    def cstring(self, what: str, limit: int = 4096) -> str:
        end = self.buf.find(b"\x00", self.pos, self.pos + limit)
        if end < 0:
            raise ValueError(f"{self.path}: corrupt COLMAP file: unterminated {what} at offset {self.pos}")
        s = self.buf[self.pos:end].decode("utf-8", errors="strict")
        self.pos = end + 1
        return s


def read_cameras_bin(path: Path) -> dict[int, ColmapCamera]:
    r = _Reader(path)
    cams = {}
    for _ in range(r.count(24, "cameras")):
        cid, mid, w, h = r.read("iiQQ", "camera header")
        if mid not in CAMERA_MODELS:
            raise ValueError(f"{path}: camera {cid} has unknown model id {mid}")
        name, npar = CAMERA_MODELS[mid]
        params = np.array(r.read(f"{npar}d", "camera params"))
        cams[cid] = _check_camera(path, ColmapCamera(cid, name, int(w), int(h), params))
    return cams


def read_images_bin(path: Path) -> list[ColmapImage]:
    r = _Reader(path)
    images = []
    for _ in range(r.count(4 + 56 + 4 + 1 + 8, "images")):
        (iid,) = r.read("i", "image id")
        pose = r.read("7d", "image pose")
        (cid,) = r.read("i", "image camera id")
        name = r.cstring("image name")
        n2d = r.count(24, "2D points")
        r.pos += 24 * n2d  # x, y (double), point3D id (int64): not needed
        images.append(_check_image(path, ColmapImage(iid, np.array(pose[:4]), np.array(pose[4:]),
                                                     cid, name)))
    return images


def read_points3d_bin(path: Path) -> tuple[np.ndarray, np.ndarray]:
    r = _Reader(path)
    n = r.count(8 + 24 + 3 + 8 + 8, "points3D")
    xyz = np.empty((n, 3), np.float64)  # [P, 3]
    rgb = np.empty((n, 3), np.uint8)  # [P, 3]
    for i in range(n):
        vals = r.read("Q3d3Bd", "point")
        xyz[i] = vals[1:4]
        rgb[i] = vals[4:7]
        track = r.count(8, "track entries")
        r.pos += 8 * track  # image id, point2D index (int32 each): not needed
    return xyz, rgb


# ------------------------------------------------------------------------------------------- text


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def read_cameras_txt(path: Path) -> dict[int, ColmapCamera]:
    cams = {}
    for ln, line in enumerate(_lines(path), start=1):
        tok = line.split()
        if not tok or tok[0].startswith("#"):
            continue
        try:
            cid, model, w, h = int(tok[0]), tok[1], int(tok[2]), int(tok[3])
            params = np.array([float(v) for v in tok[4:]])
        except (ValueError, IndexError):
            raise ValueError(f"{path}:{ln}: bad camera line {line!r}") from None
        if model not in _MODEL_IDS:
            raise ValueError(f"{path}:{ln}: unknown camera model {model!r}")
        if len(params) != _MODEL_IDS[model][1]:
            raise ValueError(f"{path}:{ln}: {model} needs {_MODEL_IDS[model][1]} params, got {len(params)}")
        cams[cid] = _check_camera(path, ColmapCamera(cid, model, w, h, params))
    return cams


def _is_points2d_line(line: str) -> bool:
    """An images.txt observation line: empty, or (x, y, point3D_id) triples of numbers."""
    tok = line.split()
    if len(tok) % 3:
        return False
    try:
        [float(t) for t in tok]
    except ValueError:
        return False
    return True


def read_images_txt(path: Path) -> list[ColmapImage]:
    """Each image line is normally followed by its 2D-point line (possibly empty); files written
    without the 2D-point lines at all are accepted too."""
    lines = [(i, ln) for i, ln in enumerate(_lines(path), start=1) if not ln.lstrip().startswith("#")]
    images = []
    k = 0
    while k < len(lines):
        ln, line = lines[k]
        k += 1
        if not line.strip():
            continue
        tok = line.split(maxsplit=9)
        try:
            if len(tok) < 10:
                raise ValueError
            iid = int(tok[0])
            pose = [float(v) for v in tok[1:8]]
            cid = int(tok[8])
        except ValueError:
            raise ValueError(f"{path}:{ln}: bad image line {line!r} (expected IMAGE_ID QW QX QY QZ "
                             f"TX TY TZ CAMERA_ID NAME)") from None
        name = tok[9].strip()
        if k < len(lines) and _is_points2d_line(lines[k][1]):
            k += 1  # this image's observations (not needed)
        images.append(_check_image(path, ColmapImage(iid, np.array(pose[:4]), np.array(pose[4:]),
                                                     cid, name)))
    return images


def read_points3d_txt(path: Path) -> tuple[np.ndarray, np.ndarray]:
    xyz, rgb = [], []
    for ln, line in enumerate(_lines(path), start=1):
        tok = line.split()
        if not tok or tok[0].startswith("#"):
            continue
        try:
            xyz.append([float(v) for v in tok[1:4]])
            rgb.append([int(v) for v in tok[4:7]])
        except ValueError:
            raise ValueError(f"{path}:{ln}: bad point line {line[:80]!r}") from None
        if len(xyz[-1]) != 3 or len(rgb[-1]) != 3 or not all(0 <= c <= 255 for c in rgb[-1]):
            raise ValueError(f"{path}:{ln}: bad point line {line[:80]!r}")
    return np.array(xyz, np.float64).reshape(-1, 3), np.array(rgb, np.uint8).reshape(-1, 3)


# ------------------------------------------------------------------------------------------ API


def _model_files(sparse_dir: Path, stem: str) -> Path:
    for ext in (".bin", ".txt"):
        p = sparse_dir / (stem + ext)
        if p.is_file():
            return p
    raise ValueError(f"sparse_dir: no {stem}.bin or {stem}.txt in {sparse_dir}")


def read_colmap_model(sparse_dir: str | os.PathLike) -> tuple[dict[int, ColmapCamera], list[ColmapImage]]:
    """(cameras by id, images in file order) from sparse_dir (prefers .bin over .txt)."""
    sparse_dir = Path(sparse_dir)
    cpath, ipath = _model_files(sparse_dir, "cameras"), _model_files(sparse_dir, "images")
    cams = read_cameras_bin(cpath) if cpath.suffix == ".bin" else read_cameras_txt(cpath)
    images = read_images_bin(ipath) if ipath.suffix == ".bin" else read_images_txt(ipath)
    for img in images:
        if img.camera_id not in cams:
            raise ValueError(f"{ipath}: image {img.name!r} refers to missing camera {img.camera_id}")
    return cams, images


def load_colmap_points(sparse_dir: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """(xyz [P,3] float32, rgb [P,3] uint8) of the SfM points."""
    path = _model_files(Path(sparse_dir), "points3D")
    xyz, rgb = read_points3d_bin(path) if path.suffix == ".bin" else read_points3d_txt(path)
    if not np.isfinite(xyz).all():
        raise ValueError(f"{path}: non-finite point coordinates")
    return xyz.astype(np.float32), rgb


def load_colmap_cameras(sparse_dir: str | os.PathLike, images_dir: str | os.PathLike | None = None,
                        downscale: int = 1) -> list[Camera]:
    """Cameras sorted by image name. downscale=N matches the images_N folders of 3DGS datasets:
    fx, fy, cx, cy divide by N and width/height become round(W / N), round(H / N)."""
    if int(downscale) != downscale or downscale < 1:
        raise ValueError(f"downscale: must be a positive integer, got {downscale}")
    cams, images = read_colmap_model(sparse_dir)
    out = []
    for img in sorted(images, key=lambda im: im.name):
        cam = cams[img.camera_id]
        K = cam.K()
        K[:2, :] /= downscale
        image_path = None if images_dir is None else safe_join(images_dir, img.name, "images_dir")
        out.append(Camera(
            name=img.name, width=round(cam.width / downscale), height=round(cam.height / downscale),
            K=torch.from_numpy(K).float(), viewmat=torch.from_numpy(img.viewmat()).float(),
            image_path=image_path, model=cam.lens, distortion=cam.lens_distortion()))
    return out


# --------------------------------------------------------------------------------------- writers


def _written_as(c: Camera) -> tuple[str, tuple]:
    """The COLMAP model a Camera is written as and its distortion params: the first of the
    lens's models (in _GSPLAT's order) that holds every non-zero coefficient."""
    if c.model not in ("pinhole", "fisheye"):
        raise ValueError(f"cameras: COLMAP has no {c.model} camera (camera {c.name!r})")
    nonzero = {(name, i) for name, t in c.distortion.items() for i in torch.nonzero(t)[:, 0].tolist()}
    for model in ("PINHOLE", "OPENCV", "FULL_OPENCV") if c.model == "pinhole" else ("OPENCV_FISHEYE",):
        if nonzero <= set(_GSPLAT[model]):
            return model, tuple(float(c.distortion[name][i]) if name in c.distortion else 0.0
                                for name, i in _GSPLAT[model])
    raise ValueError(f"cameras: COLMAP has no pinhole model with thin-prism coefficients "
                     f"(camera {c.name!r})")


def _intrinsics(cameras: list[Camera]) -> tuple[list[tuple], list[int]]:
    """Unique cameras (COLMAP model, w, h, params) and each view's camera id (1-based)."""
    uniq: dict[tuple, int] = {}
    ids = []
    for c in cameras:
        model, dist = _written_as(c)
        K = c.K.double()
        params = (float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2])) + dist
        key = (model, c.width, c.height, params)
        ids.append(uniq.setdefault(key, len(uniq) + 1))
    return list(uniq), ids


def _poses(cameras: list[Camera]) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for c in cameras:
        vm = c.viewmat.double().numpy()
        out.append((rotmat_to_qvec(vm[:3, :3]), vm[:3, 3]))
    return out


def write_colmap_text(sparse_dir: str | os.PathLike, cameras: list[Camera], points=None) -> None:
    """Write cameras.txt / images.txt / points3D.txt (PINHOLE, OPENCV, FULL_OPENCV or
    OPENCV_FISHEYE; points = optional (xyz, rgb))."""
    d = Path(sparse_dir)
    d.mkdir(parents=True, exist_ok=True)
    intr, ids = _intrinsics(cameras)
    with open(d / "cameras.txt", "w") as f:
        f.write("# CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n")
        f.writelines(f"{cid} {model} {w} {h} {' '.join(repr(p) for p in params)}\n"
                     for cid, (model, w, h, params) in enumerate(intr, start=1))
    with open(d / "images.txt", "w") as f:
        f.write("# IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME\n"
                "# POINTS2D[] as (X, Y, POINT3D_ID)\n")
        for i, (c, cid, (q, t)) in enumerate(zip(cameras, ids, _poses(cameras)), start=1):
            vals = " ".join(repr(float(v)) for v in [*q, *t])
            f.write(f"{i} {vals} {cid} {c.name}\n\n")
    xyz, rgb = points if points is not None else (np.zeros((0, 3)), np.zeros((0, 3), np.uint8))
    with open(d / "points3D.txt", "w") as f:
        f.write("# POINT3D_ID, X, Y, Z, R, G, B, ERROR, TRACK[]\n")
        for i, (p, c) in enumerate(zip(np.asarray(xyz, np.float64), np.asarray(rgb)), start=1):
            x, y, z = (repr(float(v)) for v in p)
            f.write(f"{i} {x} {y} {z} {int(c[0])} {int(c[1])} {int(c[2])} 0\n")


def write_colmap_binary(sparse_dir: str | os.PathLike, cameras: list[Camera], points=None) -> None:
    """Write cameras.bin / images.bin / points3D.bin (PINHOLE, OPENCV, FULL_OPENCV or
    OPENCV_FISHEYE; no 2D points or tracks)."""
    d = Path(sparse_dir)
    d.mkdir(parents=True, exist_ok=True)
    intr, ids = _intrinsics(cameras)
    buf = [struct.pack("<Q", len(intr))]
    for cid, (model, w, h, params) in enumerate(intr, start=1):
        buf.append(struct.pack(f"<iiQQ{len(params)}d", cid, _MODEL_IDS[model][0], w, h, *params))
    (d / "cameras.bin").write_bytes(b"".join(buf))
    buf = [struct.pack("<Q", len(cameras))]
    for i, (c, cid, (q, t)) in enumerate(zip(cameras, ids, _poses(cameras)), start=1):
        buf.append(struct.pack("<i7di", i, *q, *t, cid) + c.name.encode() + b"\x00" + struct.pack("<Q", 0))
    (d / "images.bin").write_bytes(b"".join(buf))
    xyz, rgb = points if points is not None else (np.zeros((0, 3)), np.zeros((0, 3), np.uint8))
    buf = [struct.pack("<Q", len(xyz))]
    for i, (p, c) in enumerate(zip(np.asarray(xyz, np.float64), np.asarray(rgb)), start=1):
        buf.append(struct.pack("<Q3d3BdQ", i, *p, *(int(v) for v in c), 0.0, 0))
    (d / "points3D.bin").write_bytes(b"".join(buf))
