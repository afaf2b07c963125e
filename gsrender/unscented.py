"""Projection through the unscented transform (3DGUT; gsplat's with_ut=True), docs/cameras.md.

Each Gaussian's 7 sigma points (its mean, and the mean ± sqrt(3 + λ)·the columns of a square
root of its covariance) go through the full lens map (gsrender/distortion.py); the weighted mean
and covariance of their pixels are the 2D Gaussian. The end of the projection (eps2d blur,
conic, antialiasing compensation, radii, culling) is ewa.screen_gaussians, so the outputs
are exactly ops.project's and the rasterizer consumes them unchanged. PyTorch throughout:
differentiable by autograd, on any device.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from gsrender import distortion, ewa, geometry

# The sigma points' spread and weights (Wan and van der Merwe 2000, as 3DGUT / gsplat's
# UnscentedTransformParameters): λ = α²(D + κ) − D for D = 3.
UT_ALPHA, UT_BETA, UT_KAPPA = 0.1, 2.0, 0.0

_D = 3
_LAMBDA = UT_ALPHA ** 2 * (_D + UT_KAPPA) - _D
SPREAD = math.sqrt(_D + _LAMBDA)  # sigma points at ±SPREAD along each square-root column
WEIGHT_MEAN_0 = _LAMBDA / (_D + _LAMBDA)  # the centre point's weight in the mean
WEIGHT_COV_0 = WEIGHT_MEAN_0 + 1 - UT_ALPHA ** 2 + UT_BETA  # ... in the covariance
WEIGHT_I = 1 / (2 * (_D + _LAMBDA))  # each other point's weight in both


def covariance_factors(quats=None, scales=None, covars=None) -> torch.Tensor:
    """A square root M [N,3,3] of each covariance (M Mᵀ = Σ): R·diag(scales) from quats and
    scales (3DGUT's closed form), the Cholesky factor of covars otherwise."""
    if covars is None:
        return geometry.rotation_scale(quats, scales)
    factor, info = torch.linalg.cholesky_ex(covars)
    if bool((info != 0).any()):
        bad = int(torch.nonzero(info)[0, 0])
        raise ValueError(f"covars must be symmetric positive definite; covars[{bad}] is not "
                         f"(its Cholesky factorisation failed)")
    return factor


def sigma_points(means: torch.Tensor, factors: torch.Tensor) -> torch.Tensor:
    """means [N,3], square roots [N,3,3] -> sigma points [N,7,3]: the mean, then mean + SPREAD·
    column i, then mean − SPREAD·column i (i = 0, 1, 2)."""
    offsets = SPREAD * factors.transpose(-1, -2)  # [N,3,3], row i = column i of the factor
    m = means[:, None, :]
    return torch.cat([m, m + offsets, m - offsets], dim=1)


def project(means, opacities, viewmats, Ks, width: int, height: int, eps2d: float,
            near_plane: float, far_plane: float, radius_clip: float, antialiased: bool,
            lens: distortion.Lens, *, quats=None, scales=None, covars=None) -> dict:
    """The unscented projection of N Gaussians (means [N,3] and quats [N,4] + scales [N,3], or
    covars [N,3,3]) into C cameras through `lens` -> ewa.project_covariances' dict (radii, means2d,
    depths, conics, opacities2d; 0 where culled).

    Culled, besides the EWA rules (mean depth outside [near_plane, far_plane], degenerate or
    off-screen ellipse, opacity): a Gaussian with a sigma point outside the lens's valid region
    (behind the camera, past a pinhole's fold or a fisheye's largest angle), whose fit would
    mix in meaningless pixels. (gsplat keeps such a Gaussian when another of its points is
    valid, and culls one with no sigma point within the image widened by 10%; here the
    off-screen test on the ellipse's box decides, as for EWA.)

    The sigma points, their pixels and moments are computed in float64 whatever the inputs'
    dtype: the weights (WEIGHT_MEAN_0 ≈ −99, WEIGHT_I ≈ 16.7) amplify the rounding of the
    points' pixels about 40-fold, about 1e-3 px in float32 at a few hundred pixels."""
    dt, f64 = means.dtype, torch.float64
    pts = sigma_points(means.to(f64), covariance_factors(quats, scales, covars).to(f64))  # [N,7,3]
    lens = _float64(lens)
    R, t = viewmats[:, :3, :3].to(f64), viewmats[:, :3, 3].to(f64)
    p_c = torch.einsum("cij,nkj->cnki", R, pts) + t[:, None, None, :]  # [C,N,7,3]
    z = p_c[:, :, 0, 2]  # the mean's depth [C,N]
    with torch.no_grad():
        _, in_lens = distortion.image_points(lens, p_c)
        keep = (z >= near_plane) & (z <= far_plane) & in_lens.all(-1)
    # culled Gaussians' points go through the lens at a stand-in on the axis, so nothing
    # non-finite reaches their (masked) gradients
    stand_in = torch.tensor([0.0, 0.0, 1.0], dtype=p_c.dtype, device=p_c.device)
    pix, _ = distortion.image_points(lens, torch.where(keep[..., None, None], p_c, stand_in))
    # moments relative to the centre point's pixel (the weights sum to 1, and WEIGHT_MEAN_0 is
    # about −99: pixels themselves would cancel in float32)
    d = pix - pix[:, :, :1]  # [C,N,7,2]
    shift = WEIGHT_I * d[:, :, 1:].sum(2)  # mean − centre pixel [C,N,2]
    e = d - shift[:, :, None]  # each point's pixel − the mean
    w = torch.full((7,), WEIGHT_I, dtype=e.dtype, device=e.device)
    w[0] = WEIGHT_COV_0
    cov = torch.einsum("k,cnki,cnkj->cnij", w, e, e)  # [C,N,2,2]
    cov2d = torch.stack([cov[..., 0, 0], cov[..., 0, 1], cov[..., 1, 1]], dim=-1)
    return ewa.screen_gaussians((pix[:, :, 0] + shift).to(dt), cov2d.to(dt), z.to(dt), keep,
                                opacities, width, height, eps2d, radius_clip, antialiased)


def _float64(lens: distortion.Lens) -> distortion.Lens:
    f64 = torch.float64
    return dataclasses.replace(
        lens, Ks=lens.Ks.to(f64), coeffs={k: v.to(f64) for k, v in lens.coeffs.items()},
        max_angle=None if lens.max_angle is None else lens.max_angle.to(f64))
