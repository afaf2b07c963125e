"""Between viser's camera (camera-to-world pose in OpenCV axes, vertical field of view) and
gsrender's Camera (world-to-camera viewmat, pinhole K)."""
from __future__ import annotations

import math

import numpy as np
import torch

from gsrender.cameras import Camera, pinhole
from gsrender.geometry import quat_to_rotmat


def fit_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """(w, h) with the aspect of width x height and the longer side at most max_side."""
    if width < 1 or height < 1:
        raise ValueError(f"width/height: must be positive, got {width}x{height}")
    s = min(1.0, max_side / max(width, height))
    return max(1, round(width * s)), max(1, round(height * s))


def camera_from_viser(wxyz, position, fov_y: float, width: int, height: int,
                      name: str = "viewer") -> Camera:
    """The pinhole Camera a viser client sees: wxyz/position are the camera-to-world rotation
    and camera centre (viser follows OpenCV axes: x right, y down, z forward), fov_y is the
    vertical field of view in radians; square pixels, principal point at the image centre
    (viser stretches the background image over the whole canvas)."""
    if not 0.0 < fov_y < math.pi:
        raise ValueError(f"fov_y: must be in (0, pi) radians, got {fov_y}")
    R = quat_to_rotmat(torch.as_tensor(np.asarray(wxyz, np.float64))[None])[0]  # [3, 3] c2w
    t = torch.as_tensor(np.asarray(position, np.float64))  # [3]
    vm = torch.eye(4, dtype=torch.float64)
    vm[:3, :3] = R.T
    vm[:3, 3] = -R.T @ t
    K = pinhole(width, height, 0.5 * height / math.tan(0.5 * fov_y))
    return Camera(name=name, width=width, height=height, K=K, viewmat=vm.float())


def viser_pose(cam: Camera) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(wxyz [4], position [3], fov_y, aspect) of a Camera, for a viser frustum or camera."""
    from viser.transforms import SO3

    vm = cam.viewmat.double().numpy()
    R = vm[:3, :3].T  # camera-to-world
    position = -R @ vm[:3, 3]
    fov_y = 2.0 * math.atan(0.5 * cam.height / float(cam.K[1, 1]))
    return SO3.from_matrix(R).wxyz, position, fov_y, cam.width / cam.height


def up_from_cameras(cams: list[Camera]) -> str:
    """The world axis ('+x' .. '-z') nearest the cameras' mean up direction (their -y axis:
    people hold cameras upright), for scenes such as COLMAP captures whose up is not fixed."""
    if not cams:
        raise ValueError("cams: need at least one Camera")
    up = -torch.stack([c.viewmat[1, :3].double() for c in cams]).mean(0)  # [3]; row 1 = camera y
    i = int(up.abs().argmax())
    return ("+" if up[i] >= 0 else "-") + "xyz"[i]
