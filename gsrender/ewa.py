"""EWA projection in PyTorch (docs/design.md §3): Gaussians given by world-space covariances
(rasterize's covars= path) into C cameras of one lens model, and the lens-independent screen-space
end of a projection that the unscented transform (gsrender/unscented.py) shares. Any dtype and
device, differentiable by autograd; the outputs are ops.project's, so binning and rasterization
take them unchanged. The float64 oracle (gsrender/reference.py) projects quats and scales through
project_covariances too; the kernels (ops.project) are judged against it."""
from __future__ import annotations

import math

import torch

from gsrender.contract import ALPHA_MIN, ALPHA_MIN_INV, CAMERA_MODELS
from gsrender.validate import tensor_dims


def support_radius_factor(opacity):
    """The support's radius in Mahalanobis units (docs/design.md §3; the 3σ of 3DGS, derived here
    from the cut): α = o·exp(−d²/2) ≥ ALPHA_MIN iff d ≤ k = sqrt(2·ln(o/ALPHA_MIN)) (3.33 at
    o = 1), 0 where o ≤ ALPHA_MIN. The radii are ceil(k·sqrt(cov2d_xx / yy)), as
    projection.h's project_gaussian computes them. opacity: a tensor or a Python number."""
    if isinstance(opacity, torch.Tensor):
        return torch.sqrt(2 * torch.log(torch.clamp_min(ALPHA_MIN_INV * opacity, 1.0)))
    return math.sqrt(2 * math.log(max(ALPHA_MIN_INV * opacity, 1.0)))


def _fisheye_pixel(p, f, c):
    """The equidistant fisheye map of one camera-space point p [3] to its pixel [2] (focal
    lengths f [2], principal point c [2]): radius fx·θ along (x, y), θ = atan2(|(x, y)|, z)."""
    r2 = p[0] * p[0] + p[1] * p[1]
    on_axis = r2 == 0
    r = torch.sqrt(torch.where(on_axis, torch.ones_like(r2), r2))
    theta_per_r = torch.where(on_axis, 1 / p[2], torch.atan2(r, p[2]) / r)
    return f * theta_per_r * p[:2] + c


def _lens(camera_model: str, x, y, z, Ks, width: int, height: int):
    """The lens map of each camera-space mean (x, y, z [C,N]) and the rows of its EWA Jacobian J:
    -> means2d [C,N,2], J[0] [C,N,3], J[1] [C,N,3]."""
    fx, fy = Ks[:, 0, 0, None], Ks[:, 1, 1, None]  # [C,1]
    cx, cy = Ks[:, 0, 2, None], Ks[:, 1, 2, None]
    zero = torch.zeros_like(z)
    if camera_model == "pinhole":
        # J is evaluated at x/z, y/z clamped to the image extent plus 0.3·tan(fov/2) on each side,
        # so Gaussians far outside the view do not get huge, distorted footprints.
        tan_fovx, tan_fovy = 0.5 * width / fx, 0.5 * height / fy
        lim_x_pos, lim_x_neg = (width - cx) / fx + 0.3 * tan_fovx, cx / fx + 0.3 * tan_fovx
        lim_y_pos, lim_y_neg = (height - cy) / fy + 0.3 * tan_fovy, cy / fy + 0.3 * tan_fovy
        tx = z * torch.clamp(x / z, min=-lim_x_neg, max=lim_x_pos)
        ty = z * torch.clamp(y / z, min=-lim_y_neg, max=lim_y_pos)
        # rows of J = [[fx/z, 0, −fx·tx/z²], [0, fy/z, −fy·ty/z²]]
        j0 = torch.stack([fx / z, zero, -fx * tx / (z * z)], dim=-1)  # [C,N,3]
        j1 = torch.stack([zero, fy / z, -fy * ty / (z * z)], dim=-1)
        return torch.stack([fx * x / z + cx, fy * y / z + cy], dim=-1), j0, j1
    if camera_model == "ortho":
        j0 = torch.stack([fx + zero, zero, zero], dim=-1)
        j1 = torch.stack([zero, fy + zero, zero], dim=-1)
        return torch.stack([fx * x + cx, fy * y + cy], dim=-1), j0, j1
    if camera_model == "fisheye":
        # J by forward-mode differentiation of the map itself (no hand-derived formula here)
        C, N = x.shape
        p = torch.stack([x, y, z], dim=-1).reshape(C * N, 3)
        f = torch.stack([fx, fy], dim=-1).expand(C, N, 2).reshape(C * N, 2)
        c = torch.stack([cx, cy], dim=-1).expand(C, N, 2).reshape(C * N, 2)
        means2d = torch.func.vmap(_fisheye_pixel)(p, f, c).reshape(C, N, 2)
        J = torch.func.vmap(torch.func.jacfwd(_fisheye_pixel))(p, f, c).reshape(C, N, 2, 3)
        return means2d, J[..., 0, :], J[..., 1, :]
    raise ValueError(f"camera_model: expected one of {CAMERA_MODELS}, got {camera_model!r}")


def project_covariances(means, covars, opacities, viewmats, Ks, width: int, height: int,
                        eps2d: float = 0.3, near_plane: float = 0.01, far_plane: float = 1e10,
                        radius_clip: float = 0.0, antialiased: bool = False,
                        camera_model: str = "pinhole") -> dict:
    """EWA projection of N Gaussians, given by their world-space covariances covars [N,3,3],
    into C cameras of one lens model: "pinhole", "ortho" or "fisheye" (equidistant;
    docs/cameras.md). means [N,3], opacities [N], viewmats [C,4,4] world→camera, Ks [C,3,3].
    Returns a dict:
      radii [C,N,2] int32 (opacity-aware pixel half extents; (0,0) = culled),
      means2d [C,N,2], depths [C,N] (camera z), conics [C,N,3] = (a, b, c) of cov2d⁻¹,
      opacities2d [C,N] (× antialiasing compensation when antialiased),
    with every float output 0 where culled."""
    tensor_dims(means, "means", 2, (3,))
    N = means.shape[0]
    tensor_dims(covars, "covars", 3, (N, 3, 3))
    tensor_dims(opacities, "opacities", 1, (N,))
    tensor_dims(viewmats, "viewmats", 3, (4, 4))
    tensor_dims(Ks, "Ks", 3, (viewmats.shape[0], 3, 3))

    R, t = viewmats[:, :3, :3], viewmats[:, :3, 3]  # [C,3,3], [C,3]
    p_c = torch.einsum("cij,nj->cni", R, means) + t[:, None, :]  # [C,N,3]
    cov_c = R[:, None] @ covars[None] @ R.transpose(-1, -2)[:, None]  # [C,N,3,3]
    x, y, z = p_c.unbind(-1)  # [C,N] each

    in_depth = (z >= near_plane) & (z <= far_plane)
    # stand-in depth for culled entries keeps every division finite (their results are masked)
    zs = torch.where(in_depth, z, torch.ones_like(z))

    means2d, j0, j1 = _lens(camera_model, x, y, zs, Ks, width, height)  # [C,N,2], rows of J
    # cov2d = J Σ_c Jᵀ, its three distinct entries (symmetric by construction)
    s_j0 = (cov_c @ j0[..., None])[..., 0]  # [C,N,3]
    s_j1 = (cov_c @ j1[..., None])[..., 0]
    c_xx = (j0 * s_j0).sum(-1)
    c_xy = (j0 * s_j1).sum(-1)
    c_yy = (j1 * s_j1).sum(-1)
    return screen_gaussians(means2d, torch.stack([c_xx, c_xy, c_yy], dim=-1), z, in_depth,
                            opacities, width, height, eps2d, radius_clip, antialiased)


def screen_gaussians(means2d, cov2d, depths, keep, opacities, width: int, height: int,
                     eps2d: float, radius_clip: float, antialiased: bool) -> dict:
    """The lens-independent end of a projection: image-space Gaussians (means2d [C,N,2], cov2d
    [C,N,3] = (xx, xy, yy) before the eps2d blur, depths [C,N]) and the entries the lens kept
    (keep [C,N] bool) -> project()'s dict: the eps2d low-pass filter, the conic, the antialiasing
    compensation, opacity-aware radii and off-screen culling (docs/design.md §3)."""
    c_xx, c_xy, c_yy = cov2d.unbind(-1)
    zero = torch.zeros_like(c_xx)
    det_orig = c_xx * c_yy - c_xy * c_xy
    c_xx, c_yy = c_xx + eps2d, c_yy + eps2d  # low-pass filter: at least ~eps2d px² of blur
    det = c_xx * c_yy - c_xy * c_xy
    ok_det = det > 0
    dets = torch.where(ok_det, det, torch.ones_like(det))

    if antialiased:
        ratio = det_orig / dets
        pos = ratio > 0
        # sqrt(max(0, ratio)) with a zero (not infinite) gradient where ratio ≤ 0
        comp = torch.where(pos, torch.sqrt(torch.where(pos, ratio, torch.ones_like(ratio))), zero)
        opac2d = opacities[None, :] * comp  # [C,N]
    else:
        opac2d = opacities[None, :].expand_as(c_xx)

    conics = torch.stack([c_yy / dets, -c_xy / dets, c_xx / dets], dim=-1)  # [C,N,3]

    with torch.no_grad():
        # Opacity-aware support: the ellipse's box has half extents k·sqrt(cov2d_xx/yy)
        o_ok = opac2d >= ALPHA_MIN
        k = support_radius_factor(opac2d)
        rx = torch.ceil(k * torch.sqrt(torch.clamp_min(c_xx, 0.0)))
        ry = torch.ceil(k * torch.sqrt(torch.clamp_min(c_yy, 0.0)))
        mx, my = means2d.unbind(-1)
        off_screen = (mx + rx <= 0) | (mx - rx >= width) | (my + ry <= 0) | (my - ry >= height)
        too_small = (rx <= radius_clip) & (ry <= radius_clip)
        valid = keep & ok_det & o_ok & ~too_small & ~off_screen  # NaN compares False: culled
        # huge footprints are clamped only so the int32 cast stays defined
        radii = torch.stack([rx, ry], dim=-1).clamp(0, 2**30)
        radii = torch.where(valid[..., None], radii, torch.zeros_like(radii)).to(torch.int32)

    return {
        "radii": radii,
        "means2d": torch.where(valid[..., None], means2d, torch.zeros_like(means2d)),
        "depths": torch.where(valid, depths, zero),
        "conics": torch.where(valid[..., None], conics, torch.zeros_like(conics)),
        "opacities2d": torch.where(valid, opac2d, zero),
    }
