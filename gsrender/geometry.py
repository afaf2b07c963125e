"""The Gaussians' and the cameras' rigid geometry in PyTorch (any dtype and device, differentiable
by autograd): rotations from quaternions, covariances from scales and rotations, camera centres
from world-to-camera matrices. The library (covars= projection, the unscented transform, SH
colours, the viewer, the applications) and the float64 oracle (gsrender/reference.py) both use
these, so they cannot disagree on a convention (wxyz quaternions, OpenCV world-to-camera)."""
from __future__ import annotations

import torch

from gsrender import validate as V


def quat_to_rotmat(quats: torch.Tensor) -> torch.Tensor:
    """Rotation matrices [N,3,3] from quaternions [N,4] in wxyz order (normalised here)."""
    V.tensor_dims(quats, "quats", 2, (4,))
    q = torch.nn.functional.normalize(quats, dim=-1)
    w, x, y, z = q.unbind(-1)
    rows = [
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ]
    return torch.stack(rows, dim=-1).reshape(quats.shape[:-1] + (3, 3))


def rotation_scale(quats: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """M = R·diag(scales) [N,3,3] (R from quats [N,4] wxyz, scales [N,3]): a square root of the
    covariance, M Mᵀ = Σ."""
    V.tensor_dims(scales, "scales", 2, (3,))
    return quat_to_rotmat(quats) * scales[:, None, :]  # scales the columns


def covariances(quats: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """World-space covariances Σ = R S Sᵀ Rᵀ [N,3,3] (R from quats, S = diag(scales))."""
    M = rotation_scale(quats, scales)  # [N,3,3]
    return M @ M.transpose(-1, -2)


def camera_centers(viewmats: torch.Tensor) -> torch.Tensor:
    """Camera centres in world space [C,3] from world-to-camera viewmats [C,4,4]: −Rᵀt."""
    V.tensor_dims(viewmats, "viewmats", 3, (4, 4))
    R, t = viewmats[:, :3, :3], viewmats[:, :3, 3]
    return -torch.einsum("cji,cj->ci", R, t)
