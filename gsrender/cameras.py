"""Cameras: pinhole intrinsics, look-at poses, orbits, and camera JSON in and out.

Conventions (docs/design.md §3): viewmats are world-to-camera OpenCV matrices (x right, y down,
z forward); Ks are pinhole matrices with square pixels whose principal point is the image centre
(W/2, H/2), so with pixel centres at (x + 0.5, y + 0.5) a point straight ahead lands in the middle
of the image. The one camera record is gsrender.io.cameras.Camera (re-exported here).

Camera JSON (one reader, read_cameras_json, for every command and API: load_cameras_json gives
Cameras, gsrender.loc.datasets.load_intrinsics_json localization queries) comes in two layouts:
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

from gsrender.distortion import COEFFICIENTS
from gsrender.io.cameras import Camera, lens_arguments, stack_cameras
from gsrender.io.paths import safe_join
from gsrender.ops import CAMERA_MODELS

__all__ = ["UP_AXES", "WORLD_UP", "Camera", "CameraEntry", "cameras_from_json", "cameras_to_json", "intrinsics",
           "load_cameras_json", "look_at", "orbit_cameras", "pinhole", "read_cameras_json", "rig",
           "save_cameras_json", "scene_orbit", "stack_cameras"]

WORLD_UP = (0.0, 0.0, 1.0)  # gsrender.synthetic's scenes: +z up, ground at z = 0
UP_AXES = {"+x": (1, 0, 0), "-x": (-1, 0, 0), "+y": (0, 1, 0), "-y": (0, -1, 0), "+z": (0, 0, 1),
           "-z": (0, 0, -1)}
_MAX_JSON = 256 << 20

# ----------------------------------------------------------------------------------------------
# argument checks (shared with gsrender.synthetic: every error names the argument)


def check_vec(x, name: str, last: int = 3) -> torch.Tensor:
    """x as a finite float64 tensor of shape [..., last]."""
    t = torch.as_tensor(x, dtype=torch.float64)
    if t.ndim == 0 or t.shape[-1] != last:
        raise ValueError(f"{name}: expected shape [..., {last}], got {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name}: contains NaN or Inf")
    return t


def check_int(x, name: str, minimum: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{name}: expected an int, got {type(x).__name__}")
    if x < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {x}")
    return int(x)


def check_positive(x, name: str) -> float:
    x = float(x)
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{name}: must be a positive finite number, got {x}")
    return x


def normalize(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _up_vector(up) -> torch.Tensor:
    """An UP_AXES key ("+z", "-y", ...) or a 3-vector -> unit float64 [3]."""
    if isinstance(up, str):
        if up not in UP_AXES:
            raise ValueError(f"up: expected one of {tuple(UP_AXES)} or a 3-vector, got {up!r}")
        up = UP_AXES[up]
    return normalize(check_vec(up, "up").reshape(3))


# ----------------------------------------------------------------------------------------------
# intrinsics and poses


def pinhole(width: int, height: int, focal: float, dtype=torch.float32) -> torch.Tensor:
    """Pinhole K [3,3] with focal length `focal` px on both axes (square pixels) and the principal
    point at the image centre (W/2, H/2)."""
    return torch.tensor([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]],
                        dtype=dtype)


def intrinsics(width: int, height: int, fov_deg: float = 60.0, dtype=torch.float32) -> torch.Tensor:
    """pinhole K [3,3] with *horizontal* field of view fov_deg."""
    width = check_int(width, "width")
    height = check_int(height, "height")
    fov = float(fov_deg)
    if not 0.0 < fov < 180.0:
        raise ValueError(f"fov_deg: must be in (0, 180), got {fov_deg}")
    return pinhole(width, height, 0.5 * width / math.tan(math.radians(fov) / 2), dtype)


def look_at(eye, target, up=WORLD_UP) -> torch.Tensor:
    """World-to-camera OpenCV viewmat(s) of cameras at `eye` looking at `target`.

    eye, target: [3] or [C,3] (broadcast). up: the world up direction (a 3-vector or an UP_AXES
    key); the camera's y axis (image down) is the component of -up orthogonal to the view
    direction. When the view direction is parallel to `up` (looking straight down), the world axis
    least aligned with it stands in for `up`, so the result is always a proper rotation.
    Returns [4,4] for a single camera, else [C,4,4] (float64 inside, float32 out).
    """
    eye = check_vec(eye, "eye")
    target = check_vec(target, "target")
    up = _up_vector(up)
    single = eye.ndim == 1 and target.ndim == 1
    eye, target = torch.broadcast_tensors(eye.reshape(-1, 3), target.reshape(-1, 3))
    fwd = target - eye  # [C, 3]
    dist = fwd.norm(dim=-1, keepdim=True)
    if (dist < 1e-9).any():
        raise ValueError("eye: coincides with target, the view direction is undefined")
    fwd = fwd / dist
    upc = up.reshape(-1, 3).expand_as(fwd).clone()
    right = torch.cross(fwd, upc, dim=-1)
    bad = right.norm(dim=-1) < 1e-6
    if bad.any():
        alt = torch.eye(3, dtype=fwd.dtype)[fwd[bad].abs().argmin(dim=-1)]
        right[bad] = torch.cross(fwd[bad], alt, dim=-1)
    right = normalize(right)
    down = torch.cross(fwd, right, dim=-1)  # z × x = y: right-handed x right, y down, z forward
    rot = torch.stack([right, down, fwd], dim=-2)  # [C, 3, 3] rows = camera axes in world
    vm = torch.eye(4, dtype=torch.float64).repeat(fwd.shape[0], 1, 1)
    vm[:, :3, :3] = rot
    vm[:, :3, 3] = -(rot @ eye[..., None])[..., 0]
    vm = vm.float()
    return vm[0] if single else vm


def rig(eyes, targets, width: int, height: int, fov_deg: float, up=WORLD_UP):
    """Cameras at `eyes` looking at `targets`, one K for all: (viewmats [C,4,4], Ks [C,3,3])."""
    vms = look_at(eyes, targets, up)
    if vms.ndim == 2:
        vms = vms[None]
    ks = intrinsics(width, height, fov_deg)[None].repeat(vms.shape[0], 1, 1)
    return vms, ks


# ----------------------------------------------------------------------------------------------
# orbits


def _plane_basis(up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit e1, e2 spanning the plane normal to `up`, right-handed (e1 × e2 = up): e1 is the world
    axis least aligned with up, made orthogonal to it (+x for up = +z, so e2 = +y)."""
    axis = torch.eye(3, dtype=torch.float64)[up.abs().argmin()]
    e1 = normalize(axis - (axis @ up) * up)
    return e1, torch.linalg.cross(up, e1)


def orbit_cameras(n: int, radius: float, height: float, target=(0.0, 0.0, 0.0), width: int = 640,
                  height_px: int = 480, fov_deg: float = 60.0, start_deg: float = 0.0, up=WORLD_UP):
    """n cameras evenly spaced on a circle of `radius` around `target` in the plane normal to `up`,
    `height` above it along up, all looking at target. Camera i is at azimuth start_deg + 360·i/n
    (for up = +z: from +x towards +y; see _plane_basis). Returns (viewmats [n,4,4], Ks [n,3,3])."""
    n = check_int(n, "n")
    radius = check_positive(radius, "radius")
    tgt = check_vec(target, "target")
    u = _up_vector(up)
    e1, e2 = _plane_basis(u)
    a = torch.deg2rad(float(start_deg) + 360.0 * torch.arange(n, dtype=torch.float64) / n)[:, None]
    eyes = tgt + radius * (a.cos() * e1 + a.sin() * e2) + float(height) * u
    return rig(eyes, tgt, width, height_px, fov_deg, u)


def scene_orbit(means: torch.Tensor, n: int, width: int, height: int, fov_deg: float = 60.0, up="+z",
                elevation_deg: float = 20.0, distance_scale: float = 1.0) -> list[Camera]:
    """n Cameras on an orbit fitted to a scene, looking at its centre: centre = per-axis median of
    the means, radius = half the diagonal of the 2..98 percentile bounding box (robust to stray
    Gaussians), far enough that this sphere fits the narrower field of view, elevation_deg above
    the plane normal to `up` (an UP_AXES key or a 3-vector). Camera 0 is on the e2 axis of
    _plane_basis (+y for up = +z)."""
    n = check_int(n, "n")
    pts = means.detach().cpu().double()
    if pts.shape[0] > 1_000_000:  # percentiles on a deterministic subsample: same answer, less time
        pts = pts[:: pts.shape[0] // 1_000_000]
    centre = pts.median(dim=0).values  # [3]
    lo, hi = (torch.from_numpy(np.percentile(pts.numpy(), q, axis=0)) for q in (2.0, 98.0))
    radius = max(0.5 * float((hi - lo).norm()), 1e-6)
    K = intrinsics(width, height, fov_deg)
    half_fov = math.atan(0.5 * min(width / K[0, 0].item(), height / K[1, 1].item()))
    dist = check_positive(distance_scale, "distance_scale") * radius / math.sin(half_fov)
    el = math.radians(elevation_deg)
    vms, ks = orbit_cameras(n, dist * math.cos(el), dist * math.sin(el), centre, width, height, fov_deg,
                            start_deg=90.0, up=up)
    return [Camera(name=f"orbit_{i:03d}", width=width, height=height, K=k, viewmat=vm)
            for i, (vm, k) in enumerate(zip(vms, ks))]


# ----------------------------------------------------------------------------------------------
# camera JSON


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
