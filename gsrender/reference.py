"""Dense pure-PyTorch reference renderer: the test oracle every backend is judged against.

Written for exactness and clarity, not speed (docs/design.md §3, §4). Every function works in the dtype
and on the device of its inputs (float64 for oracle comparisons) and is differentiable with
autograd in every float input. Rasterization is dense over pixels × Gaussians, processed in
pixel chunks (checkpointed when gradients are needed) so memory stays bounded; it is meant for
small scenes (tens of thousands of pixels × a few thousand Gaussians).

Culled or non-contributing entries are masked with torch.where on safe stand-in values, so no
inf/NaN gradient leaks from Gaussians behind the camera, degenerate covariances or masked pairs.
"""
from __future__ import annotations

import numbers
from collections.abc import Sequence

import torch
from torch.utils.checkpoint import checkpoint

# The rendering contract's thresholds: the kernels' own definitions (gsrender/contract.py).
from gsrender.contract import (
    ALPHA_MAX,
    ALPHA_MIN,
    ALPHA_MIN_INV,
    CAMERA_MODELS,
    DEFAULT_WEIGHT_PARAMS,
    MODES,
    TRANSMITTANCE_MIN,
)

# The projection and its geometry are the library's, one definition each; the oracle uses them.
from gsrender.ewa import project_covariances, screen_gaussians, support_radius_factor
from gsrender.geometry import camera_centers, covariances, quat_to_rotmat
from gsrender.validate import tensor_dims

# Pixel × Gaussian pairs evaluated at once by rasterize (bounds the dense temporaries; larger
# problems are also checkpointed chunk by chunk when gradients are needed).
CHUNK_PAIRS = 1 << 20

# Real SH constants of 3DGS (Condon–Shortley phase, basis ordered m = −l..l within a degree).
SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792,
         0.5462742152960396)
SH_C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154,
         -0.4570457994644658, 1.445305721320277, -0.5900435899266435)


# ----------------------------------------------------------------------------- input checks


def _check_per_camera(t, name: str, C: int, N: int, last: Sequence[int | None]):
    """t must be per Gaussian [N, *last] or per camera and Gaussian [C, N, *last]."""
    tensor_dims(t, name, (1 + len(last), 2 + len(last)), (N, *last))
    if t.dim() == 2 + len(last) and t.shape[0] != C:
        raise ValueError(f"{name}: per-camera values need {C} cameras, got shape "
                         f"{tuple(t.shape)}")


def _check_mode(mode: str, weight_params) -> tuple[float, float, float]:
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    wp = tuple(float(v) for v in weight_params)
    if len(wp) != 3:
        raise ValueError(f"weight_params: expected (sigma, beta, w_bg), got {weight_params!r}")
    if mode == "weighted" and not wp[2] > 0:
        # uncovered pixels would be 0/0
        raise ValueError(f"weight_params: w_bg must be > 0, got {wp[2]}")
    return wp


# ----------------------------------------------------------------------------- projection


def project(means, quats, scales, opacities, viewmats, Ks, width: int, height: int,
            eps2d: float = 0.3, near_plane: float = 0.01, far_plane: float = 1e10,
            radius_clip: float = 0.0, antialiased: bool = False,
            camera_model: str = "pinhole") -> dict:
    """EWA projection of N Gaussians into C cameras (docs/design.md §3, as gsplat) of one lens
    model: ewa.project_covariances of their covariances (quats [N,4] wxyz, scales [N,3]); its
    dict of radii, means2d, depths, conics and opacities2d."""
    tensor_dims(means, "means", 2, (3,))
    N = means.shape[0]
    for t, name, last in ((quats, "quats", (N, 4)), (scales, "scales", (N, 3))):
        tensor_dims(t, name, 2, last)
    return project_covariances(means, covariances(quats, scales), opacities, viewmats, Ks, width,
                               height, eps2d, near_plane, far_plane, radius_clip, antialiased,
                               camera_model)


# ------------------------------------------------------------------------- lens distortion


def distorted_pixels(camera_model: str, p, K, radial=None, tangential=None, thin_prism=None):
    """One camera's distorted lens map, term by term as OpenCV documents it (the oracle of
    gsrender.distortion.image_points): p [M,3] camera-space points in front of the camera, K
    [3,3], coefficients radial [6] (pinhole k1..k6) or [4] (fisheye k1..k4), tangential [2]
    (p1, p2), thin_prism [4] (s1..s4), None for zero -> pixels [M,2].

    pinhole: x' = x/z, y' = y/z, r² = x'² + y'²,
      x'' = x'·(1 + k1r² + k2r⁴ + k3r⁶)/(1 + k4r² + k5r⁴ + k6r⁶) + 2p1x'y' + p2(r² + 2x'²) + s1r² + s2r⁴,
      y'' = y'·(1 + k1r² + k2r⁴ + k3r⁶)/(1 + k4r² + k5r⁴ + k6r⁶) + p1(r² + 2y'²) + 2p2x'y' + s3r² + s4r⁴;
    fisheye: a = x/z, b = y/z, r = √(a² + b²), θ = atan(r), θd = θ(1 + k1θ² + k2θ⁴ + k3θ⁶ + k4θ⁸),
      x'' = (θd/r)·a, y'' = (θd/r)·b (x'' = a, y'' = b on the axis);
    then u = fx·x'' + cx, v = fy·y'' + cy."""
    a, b = p[:, 0] / p[:, 2], p[:, 1] / p[:, 2]
    r2 = a * a + b * b
    if camera_model == "pinhole":
        k = [0.0] * 6 if radial is None else [float(v) for v in radial]
        p1, p2 = (0.0, 0.0) if tangential is None else [float(v) for v in tangential]
        s = [0.0] * 4 if thin_prism is None else [float(v) for v in thin_prism]
        r4, r6 = r2 ** 2, r2 ** 3
        radial_factor = (1 + k[0] * r2 + k[1] * r4 + k[2] * r6) / (1 + k[3] * r2 + k[4] * r4 + k[5] * r6)
        xd = a * radial_factor + 2 * p1 * a * b + p2 * (r2 + 2 * a ** 2) + s[0] * r2 + s[1] * r4
        yd = b * radial_factor + p1 * (r2 + 2 * b ** 2) + 2 * p2 * a * b + s[2] * r2 + s[3] * r4
    elif camera_model == "fisheye":
        k = [0.0] * 4 if radial is None else [float(v) for v in radial]
        r = torch.sqrt(r2)
        theta = torch.atan(r)
        theta_d = theta * (1 + k[0] * theta ** 2 + k[1] * theta ** 4 + k[2] * theta ** 6
                           + k[3] * theta ** 8)
        scale = torch.where(r > 0, theta_d / torch.where(r > 0, r, torch.ones_like(r)),
                            torch.ones_like(r))
        xd, yd = scale * a, scale * b
    else:
        raise ValueError(f"camera_model: expected 'pinhole' or 'fisheye', got {camera_model!r}")
    return torch.stack([K[0, 0] * xd + K[0, 2], K[1, 1] * yd + K[1, 2]], dim=-1)


# --------------------------------------------------------------------- spherical harmonics


def sh_eval(degree: int, dirs: torch.Tensor, coeffs: torch.Tensor) -> torch.Tensor:
    """Real SH colour Σ_k Y_k(dir)·coeffs[k] [..., 3], WITHOUT the +0.5 offset.

    dirs [..., 3] (normalised here), coeffs [..., K, 3] broadcastable against dirs, with
    K ≥ (degree+1)²; only the first (degree+1)² coefficients are used. 3DGS's basis and signs.
    """
    if isinstance(degree, bool) or not isinstance(degree, numbers.Integral) or not 0 <= degree <= 3:
        raise ValueError(f"degree: expected an int in 0..3, got {degree!r}")
    degree = int(degree)
    tensor_dims(dirs, "dirs", None, (3,))
    tensor_dims(coeffs, "coeffs", None, (None, 3))
    if coeffs.shape[-2] < (degree + 1) ** 2:
        raise ValueError(f"coeffs: degree {degree} needs {(degree + 1) ** 2} coefficients, got "
                         f"{coeffs.shape[-2]}")
    c = coeffs[..., : (degree + 1) ** 2, :].unbind(-2)  # list of [..., 3]
    out = SH_C0 * c[0]
    if degree == 0:
        # the result does not depend on dirs, but keep its broadcast shape
        return out + torch.zeros_like(dirs)
    d = torch.nn.functional.normalize(dirs, dim=-1)
    x, y, z = (v[..., None] for v in d.unbind(-1))  # [..., 1] each, broadcast over RGB
    out = out - SH_C1 * y * c[1] + SH_C1 * z * c[2] - SH_C1 * x * c[3]
    if degree >= 2:
        xx, yy, zz = x * x, y * y, z * z
        xy, yz, xz = x * y, y * z, x * z
        out = (out
               + SH_C2[0] * xy * c[4]
               + SH_C2[1] * yz * c[5]
               + SH_C2[2] * (2 * zz - xx - yy) * c[6]
               + SH_C2[3] * xz * c[7]
               + SH_C2[4] * (xx - yy) * c[8])
        if degree >= 3:
            out = (out
                   + SH_C3[0] * y * (3 * xx - yy) * c[9]
                   + SH_C3[1] * xy * z * c[10]
                   + SH_C3[2] * y * (4 * zz - xx - yy) * c[11]
                   + SH_C3[3] * z * (2 * zz - 3 * xx - 3 * yy) * c[12]
                   + SH_C3[4] * x * (4 * zz - xx - yy) * c[13]
                   + SH_C3[5] * z * (xx - yy) * c[14]
                   + SH_C3[6] * x * (xx - 3 * yy) * c[15])
    return out


def sh_colors(means: torch.Tensor, sh: torch.Tensor, viewmats: torch.Tensor,
              sh_degree: int) -> torch.Tensor:
    """View-dependent RGB [C,N,3] = max(SH(dir)·coeffs + 0.5, 0), dir = mean − camera centre.

    means [N,3], sh [N,K,3] (or per camera [C,N,K,3]), viewmats [C,4,4].
    """
    tensor_dims(means, "means", 2, (3,))
    tensor_dims(sh, "sh", (3, 4), (None, 3))
    dirs = means[None, :, :] - camera_centers(viewmats)[:, None, :]  # [C,N,3]
    coeffs = sh if sh.dim() == 4 else sh[None]  # [C or 1,N,K,3]
    return torch.clamp_min(sh_eval(sh_degree, dirs, coeffs) + 0.5, 0.0)


# ----------------------------------------------------------------------------- compositing


def _pixel_centers(width: int, height: int, like: torch.Tensor) -> torch.Tensor:
    """Pixel centres (x+0.5, y+0.5) [H*W,2], row-major (y outer), in like's dtype/device."""
    ys, xs = torch.meshgrid(torch.arange(height, device=like.device),
                            torch.arange(width, device=like.device), indexing="ij")
    return torch.stack([xs, ys], dim=-1).reshape(-1, 2).to(like.dtype) + 0.5


def _pair_alphas(pix, means2d, conics, opacities):
    """α [P,N] of every (pixel, Gaussian) pair, 0 where the pair does not contribute.

    pix [P,2], means2d [N,2], conics [N,3], opacities [N].
    """
    d = means2d[None, :, :] - pix[:, None, :]  # [P,N,2], (dx, dy) = mean2d − pixel centre
    dx, dy = d.unbind(-1)
    a, b, c = (v[None, :] for v in conics.unbind(-1))
    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy  # [P,N]
    # σ < 0 only comes from a degenerate conic; such pairs do not contribute (as in 3DGS)
    pos = sigma >= 0
    alpha = torch.clamp_max(
        opacities[None, :] * torch.exp(-torch.where(pos, sigma, torch.zeros_like(sigma))),
        ALPHA_MAX)
    with torch.no_grad():
        keep = pos & (alpha >= ALPHA_MIN)
    return torch.where(keep, alpha, torch.zeros_like(alpha))


def _sorted_weights(A):
    """Front-to-back weights for α [P,N] in depth order -> (W [P,N], T_final [P]).

    W = α·T·[T·(1−α) ≥ 1e-4] with T the transmittance before each Gaussian: the pixel stops at
    the first Gaussian that would push T below 1e-4 and that Gaussian is excluded (3DGS). The
    stop is decided without gradient, so gradients are those of 3DGS's backward pass.
    """
    P, N = A.shape
    if N == 0:
        return A, A.new_ones(P)
    one_minus = 1 - A  # ≥ 0.01, so every product below stays positive
    with torch.no_grad():
        # the running products of 3DGS's sequential T *= 1 − α; T only decreases, so the
        # kept set is a prefix of the list
        keep = torch.cumprod(one_minus, dim=-1) >= TRANSMITTANCE_MIN
    T_incl = torch.cumprod(torch.where(keep, one_minus, torch.ones_like(A)), dim=-1)  # [P,N]
    T_excl = torch.cat([torch.ones_like(T_incl[:, :1]), T_incl[:, :-1]], dim=-1)
    W = torch.where(keep, A * T_excl, torch.zeros_like(A))
    return W, T_incl[:, -1]


def depth_weight(depths: torch.Tensor, sigma: float, beta: float) -> torch.Tensor:
    """Weighted mode's φ(z) = exp(−σ·max(z, 0)^β), with zero gradient for z ≤ 0."""
    pos = depths > 0
    z = torch.where(pos, depths, torch.ones_like(depths))
    return torch.exp(-sigma * torch.where(pos, z.pow(beta), torch.zeros_like(z)))


def _blend(pix, means2d, conics, opacities, depths, mode, wp):
    """Blend weights of one camera's pixel chunk.

    Gaussians [N,...] must already be the valid ones, in depth order for "sorted".
    Returns W [P,N], bg_weight [P], alpha [P] with render = W @ F + bg_weight·bg.
    """
    A = _pair_alphas(pix, means2d, conics, opacities)  # [P,N]
    if mode == "sorted":
        W, T_final = _sorted_weights(A)
        return W, T_final, 1 - T_final
    sigma_w, beta, w_bg = wp
    w = A * depth_weight(depths, sigma_w, beta)[None, :]  # [P,N]
    denom = w.sum(-1) + w_bg  # [P], ≥ w_bg > 0
    alpha = 1 - torch.exp(torch.log1p(-A).sum(-1))
    return w / denom[:, None], w_bg / denom, alpha


def _composite_chunk(pix, means2d, conics, opacities, colors, depths, bg, mode, wp):
    W, bg_w, alpha = _blend(pix, means2d, conics, opacities, depths, mode, wp)
    return W @ colors + bg_w[:, None] * bg[None, :], alpha  # [P,CH], [P]


def _prepare_raster(means2d, conics, opacities2d, depths, width, height, mode, weight_params,
                    valid):
    tensor_dims(opacities2d, "opacities2d", 2)
    C, N = opacities2d.shape
    tensor_dims(means2d, "means2d", 3, (C, N, 2))
    tensor_dims(conics, "conics", 3, (C, N, 3))
    tensor_dims(depths, "depths", 2, (C, N))
    if int(width) <= 0 or int(height) <= 0:
        raise ValueError(f"width, height: expected positive sizes, got {width}x{height}")
    wp = _check_mode(mode, weight_params)
    if valid is None:
        valid = opacities2d > 0
    tensor_dims(valid, "valid", 2, (C, N))
    if valid.dtype != torch.bool:
        raise TypeError(f"valid: expected a bool tensor, got {valid.dtype}")
    orders = []
    with torch.no_grad():
        for c in range(C):
            idx = valid[c].nonzero().squeeze(1)
            if mode == "sorted":
                # stable: equal depths keep index order
                idx = idx[torch.sort(depths[c, idx], stable=True).indices]
            orders.append(idx)
    return wp, orders


def rasterize(means2d, conics, opacities2d, colors, depths, width: int, height: int,
              backgrounds=None, mode: str = "sorted", weight_params=DEFAULT_WEIGHT_PARAMS,
              valid=None):
    """Dense alpha compositing of projected Gaussians (docs/design.md §3 "Alpha", §4 modes).

    means2d [C,N,2], conics [C,N,3], opacities2d [C,N], colors [C,N,CH] (any CH ≥ 1), depths
    [C,N], backgrounds [C,CH] or None (zeros), valid [C,N] bool (default opacities2d > 0;
    invalid Gaussians are ignored).
    mode "sorted": front to back by depth (stable), 3DGS's early stop;
      render = Σ wᵢcᵢ + T_final·bg, alphas = 1 − T_final.
    mode "weighted": render = (Σ αᵢφ(zᵢ)cᵢ + w_bg·bg) / (Σ αᵢφ(zᵢ) + w_bg), alphas = 1 − Π(1−αᵢ),
      φ(z) = exp(−σ·z^β), weight_params = (σ, β, w_bg).
    Returns (render [C,H,W,CH], alphas [C,H,W,1]).
    """
    wp, orders = _prepare_raster(means2d, conics, opacities2d, depths, width, height, mode,
                                 weight_params, valid)
    C, N = opacities2d.shape
    tensor_dims(colors, "colors", 3, (C, N, None))
    CH = colors.shape[-1]
    if CH < 1:
        raise ValueError("colors: need at least one channel")
    if backgrounds is None:
        backgrounds = colors.new_zeros(C, CH)
    tensor_dims(backgrounds, "backgrounds", 2, (C, CH))

    pix = _pixel_centers(width, height, means2d)  # [P,2]
    P = pix.shape[0]
    renders, alphas = [], []
    for c, idx in enumerate(orders):
        args = (means2d[c, idx], conics[c, idx], opacities2d[c, idx], colors[c, idx],
                depths[c, idx], backgrounds[c])
        # when the image takes several chunks, recompute each chunk in backward instead of
        # storing its [P,N] temporaries (small problems skip this: it triples backward time)
        use_ckpt = (torch.is_grad_enabled() and P * idx.numel() > CHUNK_PAIRS
                    and any(a.requires_grad for a in args))
        step = max(1, CHUNK_PAIRS // max(1, idx.numel()))
        outs, alps = [], []
        for p0 in range(0, P, step):
            chunk = (pix[p0:p0 + step],) + args + (mode, wp)
            if use_ckpt:
                out, alpha = checkpoint(_composite_chunk, *chunk, use_reentrant=False)
            else:
                out, alpha = _composite_chunk(*chunk)
            outs.append(out)
            alps.append(alpha)
        renders.append(torch.cat(outs).reshape(height, width, CH))
        alphas.append(torch.cat(alps).reshape(height, width, 1))
    return torch.stack(renders), torch.stack(alphas)


def blend_weights(means2d, conics, opacities2d, depths, width: int, height: int,
                  mode: str = "sorted", weight_params=DEFAULT_WEIGHT_PARAMS, valid=None) -> dict:
    """Every pixel's blend weights, dense (small scenes only; same arguments as rasterize).

    Returns weights [C,H,W,N] (by original Gaussian index, 0 for invalid Gaussians and
    non-contributing pairs), bg_weights [C,H,W,1] and alphas [C,H,W,1], such that
    rasterize(...) == weights @ colors + bg_weights·bg.
    """
    wp, orders = _prepare_raster(means2d, conics, opacities2d, depths, width, height, mode,
                                 weight_params, valid)
    N = opacities2d.shape[1]
    pix = _pixel_centers(width, height, means2d)
    Ws, bgs, alphas = [], [], []
    for c, idx in enumerate(orders):
        W, bg_w, alpha = _blend(pix, means2d[c, idx], conics[c, idx], opacities2d[c, idx],
                                depths[c, idx], mode, wp)
        Ws.append(W.new_zeros(pix.shape[0], N).index_copy(1, idx, W).reshape(height, width, N))
        bgs.append(bg_w.reshape(height, width, 1))
        alphas.append(alpha.reshape(height, width, 1))
    return {"weights": torch.stack(Ws), "bg_weights": torch.stack(bgs),
            "alphas": torch.stack(alphas)}


def composite_sequential(alphas_sorted, colors_sorted, bg):
    """3DGS's per-pixel forward loop for ONE pixel, written plainly (the tests' ground truth).

    alphas_sorted: α of the pixel's Gaussians front to back (pairs below 1/255 are skipped),
    colors_sorted: their colours [CH] each, bg [CH]. Returns (colour [CH], alpha).
    """
    T = 1.0
    out = bg * 0
    for a, c in zip(alphas_sorted, colors_sorted):
        if a < ALPHA_MIN:
            continue
        next_T = T * (1 - a)
        if next_T < TRANSMITTANCE_MIN:
            break
        out = out + a * T * c
        T = next_T
    return out + T * bg, 1 - T


# ---------------------------------------------------------------------------------- render


def render(means, quats, scales, opacities, colors, viewmats, Ks, width: int, height: int, *,
           sh_degree: int | None = None, features=None, backgrounds=None, mode: str = "sorted",
           weight_params=DEFAULT_WEIGHT_PARAMS, near_plane: float = 0.01,
           far_plane: float = 1e10, eps2d: float = 0.3, radius_clip: float = 0.0,
           antialiased: bool = False, camera_model: str = "pinhole") -> dict:
    """Project, colour and rasterize a scene in one pass over [RGB(3), depth(1), features(D)].

    colors: RGB [N,3] or [C,N,3] when sh_degree is None, else SH coefficients [N,K,3] (or
    [C,N,K,3]); features [N,D] or [C,N,D] optional; backgrounds [C,3] or [3] (RGB; depth and
    features get background 0).
    Returns colors [C,H,W,3], features [C,H,W,D] or None, alphas [C,H,W,1], depths [C,H,W,1]
    (Σ wᵢzᵢ, not divided by alpha; weighted mode normalises it like every channel) and meta
    (the project() dict).
    """
    tensor_dims(viewmats, "viewmats", 3, (4, 4))
    C, N = viewmats.shape[0], means.shape[0]
    meta = project(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d=eps2d,
                   near_plane=near_plane, far_plane=far_plane, radius_clip=radius_clip,
                   antialiased=antialiased, camera_model=camera_model)

    if sh_degree is None:
        _check_per_camera(colors, "colors", C, N, (3,))
        rgb = colors.expand(C, N, 3)
    else:
        _check_per_camera(colors, "colors", C, N, (None, 3))
        rgb = sh_colors(means, colors, viewmats, sh_degree)  # [C,N,3]
    channels = [rgb, meta["depths"][..., None]]
    D = 0
    if features is not None:
        _check_per_camera(features, "features", C, N, (None,))
        D = features.shape[-1]
        if D < 1:
            raise ValueError("features: need at least one channel (D >= 1)")
        channels.append(features.expand(C, N, D))
    stacked = torch.cat(channels, dim=-1)  # [C,N,4+D]

    if backgrounds is None:
        bg = stacked.new_zeros(C, 4 + D)
    else:
        tensor_dims(backgrounds, "backgrounds", (1, 2), (3,))
        bg = torch.cat([backgrounds.expand(C, 3), backgrounds.new_zeros(C, 1 + D)], dim=-1)

    valid = meta["radii"].amax(-1) > 0  # [C,N]
    out, alphas = rasterize(meta["means2d"], meta["conics"], meta["opacities2d"], stacked,
                            meta["depths"], width, height, backgrounds=bg, mode=mode,
                            weight_params=weight_params, valid=valid)
    return {
        "colors": out[..., :3],
        "depths": out[..., 3:4],
        "features": out[..., 4:] if features is not None else None,
        "alphas": alphas,
        "meta": meta,
    }


__all__ = [
    "ALPHA_MAX", "ALPHA_MIN", "ALPHA_MIN_INV", "CAMERA_MODELS", "CHUNK_PAIRS", "DEFAULT_WEIGHT_PARAMS", "MODES", "SH_C0", "SH_C1",
    "SH_C2", "SH_C3", "TRANSMITTANCE_MIN", "blend_weights", "camera_centers",
    "composite_sequential", "covariances", "depth_weight", "project", "project_covariances",
    "quat_to_rotmat", "rasterize", "render", "screen_gaussians", "sh_colors", "sh_eval",
    "support_radius_factor",
]
