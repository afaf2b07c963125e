"""The public renderer: rasterize() and RenderOutput (docs/design.md §1, §3, §4)."""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from gsrender import _C, geometry, ops, projection
from gsrender import validate as V
from gsrender.contract import CAMERA_MODELS, DEFAULT_WEIGHT_PARAMS, MAX_FEATURES, MODES

PRECISIONS = ops.PRECISIONS  # ("auto", "fp32", "tf32", "fp16", "bf16"), from raster_plan.h
BACKENDS = ("auto", "cpu", "cuda")


@dataclass
class RenderOutput:
    colors: torch.Tensor  # [C, H, W, 3]
    alphas: torch.Tensor  # [C, H, W, 1]
    depths: torch.Tensor  # [C, H, W, 1] expected depth Σ w z (ED = depths / alphas)
    features: torch.Tensor | None = None  # [C, H, W, D]
    meta: dict = field(default_factory=dict)


def check_inputs(means, quats, scales, opacities, colors, viewmats, Ks, width, height, sh_degree,
                  features, backgrounds, *, sh_channels: bool = False, covars=None):
    """Shapes, dtypes and devices always; values (finite, ranges) on the CPU, and on CUDA under
    validation (V.values_checked). On the CPU the Gaussians' values take one pass over the four
    tensors (_C.gaussian_faults: one reduction per tensor and condition cost ~7 ms a frame at 1M).
    sh_channels: the caller passes SH coefficients (colors) and features on the CPU to
    ops.sh_channels, whose kernel checks they are finite as it reads them, so they are not read
    here too (at 1M Gaussians a separate sum over the 192 MB of coefficients cost 6.5 ms a frame).
    covars [N,3,3] replaces quats and scales (which are then None) and is checked on its own."""
    one_pass = (covars is None and isinstance(means, torch.Tensor) and means.device.type == "cpu"
                and V.values_checked(means.device))
    V.tensor(means, "means", (None, 3), finite=not one_pass)
    N, dt, dev = means.shape[0], means.dtype, means.device
    kernel_checks = sh_channels and sh_degree is not None and dev.type == "cpu"
    if dt not in (torch.float32, torch.float64):
        raise TypeError(f"means must be float32 or float64, got {dt}")
    kw = {"dtype": dt, "device": dev}
    if covars is None:
        V.tensor(quats, "quats", (N, 4), finite=not one_pass, **kw)
        V.tensor(scales, "scales", (N, 3), finite=not one_pass, **kw)
    else:
        if quats is not None or scales is not None:
            raise ValueError("covars replaces quats and scales: pass quats=None and scales=None "
                             "with covars")
        V.tensor(covars, "covars", (N, 3, 3), **kw)
    V.tensor(opacities, "opacities", (N,), finite=not one_pass, **kw)
    if one_pass:
        faults = _C.gaussian_faults(means, quats, scales, opacities)
        for bit, message in enumerate(_GAUSSIAN_FAULTS):
            if faults >> bit & 1:
                raise ValueError(message)
    V.tensor(viewmats, "viewmats", (None, 4, 4), **kw)
    C = viewmats.shape[0]
    if C == 0:
        raise ValueError("viewmats must hold at least one camera, got 0")
    V.tensor(Ks, "Ks", (C, 3, 3), **kw)
    V.positive_int(width, "width", 16384)
    V.positive_int(height, "height", 16384)
    if V.values_checked(dev):
        if not one_pass:
            _check_ranges(scales, quats, opacities)
        _check_focal_lengths(Ks)
    for name, t in (("colors", colors), ("features", features), ("backgrounds", backgrounds)):
        if t is None and name != "colors":
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if sh_degree is None:
        if colors.dim() == 2:
            V.tensor(colors, "colors", (N, 3), **kw)
        else:
            V.tensor(colors, "colors", (C, N, 3), **kw)
    else:
        if isinstance(sh_degree, bool) or not isinstance(sh_degree, int) or not 0 <= sh_degree <= 3:
            raise ValueError(f"sh_degree must be an int in [0, 3], got {sh_degree!r}")
        V.tensor(colors, "colors", (N, None, 3), finite=not kernel_checks, **kw)
        if colors.shape[1] < (sh_degree + 1) ** 2:
            raise ValueError(f"colors holds {colors.shape[1]} SH coefficients, sh_degree={sh_degree} "
                             f"needs {(sh_degree + 1) ** 2}")
    if features is not None:
        shape = (N, None) if features.dim() == 2 else (C, N, None)
        V.tensor(features, "features", shape, finite=not kernel_checks, **kw)
        D = features.shape[-1]
        if not 1 <= D <= MAX_FEATURES:
            raise ValueError(f"features must have D in [1, {MAX_FEATURES}] channels, got D={D}")
    if backgrounds is not None:
        shape = (3,) if backgrounds.dim() == 1 else (C, 3)
        V.tensor(backgrounds, "backgrounds", shape, **kw)


_SCALES_NOT_POSITIVE = "scales must be positive (pass activated scales, e.g. exp(log_scales))"
_QUAT_ZERO = "quats contains a zero quaternion"
_OPACITY_OUTSIDE = "opacities must lie in [0, 1] (pass activated opacities, e.g. sigmoid)"
# _C.gaussian_faults' bits (csrc/ops/cpu/gaussian_checks.h), in order: the message of each
_GAUSSIAN_FAULTS = ("means contains NaN or Inf", "quats contains NaN or Inf",
                    "scales contains NaN or Inf", "opacities contains NaN or Inf",
                    _SCALES_NOT_POSITIVE, _QUAT_ZERO, _OPACITY_OUTSIDE)


def _check_ranges(scales, quats, opacities):
    """The Gaussians' range checks off the CPU (on CUDA only under validation, see
    V.values_checked; the CPU makes them and the finite checks in one pass, _C.gaussian_faults).
    Each is one reduction (amin / aminmax) rather than a comparison tensor and an any(). The
    inputs are already known finite, so no NaN hides from the comparisons. quats and scales are
    None where covars replaces them."""
    if scales is not None and scales.numel() and bool(scales.amin() <= 0):
        raise ValueError(_SCALES_NOT_POSITIVE)
    if quats is not None and quats.numel() and bool(quats.norm(dim=-1).amin() < 1e-12):
        raise ValueError(_QUAT_ZERO)
    if opacities.numel():
        lo, hi = torch.aminmax(opacities)
        if bool((lo < 0) | (hi > 1)):
            raise ValueError(_OPACITY_OUTSIDE)


def _check_focal_lengths(Ks):
    if bool(torch.minimum(Ks[:, 0, 0], Ks[:, 1, 1]).amin() <= 0):  # fx, fy: one read, not two
        raise ValueError("Ks must have positive focal lengths fx, fy")


@V.per_call
def rasterize(means, quats, scales, opacities, colors, viewmats, Ks, width: int, height: int, *,
              sh_degree: int | None = None, features=None, backgrounds=None, mode: str = "sorted",
              near_plane: float = 0.01, far_plane: float = 1e10, eps2d: float = 0.3,
              antialiased: bool = False, camera_model: str = "pinhole", tile_size: int = 16,
              precision: str = "auto", backend: str = "auto", radius_clip: float = 0.0,
              covars=None, with_ut: bool = False, radial_coeffs=None, tangential_coeffs=None,
              thin_prism_coeffs=None,
              weight_params=DEFAULT_WEIGHT_PARAMS, profile: bool = False,
              deterministic: bool | None = None, validate: bool | None = None) -> RenderOutput:
    """Renders N Gaussians into C cameras: RGB, expected depth, alpha and D feature channels in one
    pass. Differentiable in means, quats, scales, opacities, colors, features, backgrounds and
    viewmats (and in covars and the distortion coefficients, below). See docs/design.md §3 for the conventions; shapes:

    means [N,3], quats [N,4] wxyz, scales [N,3] > 0, opacities [N] in [0,1], colors [N,3] or
    [C,N,3] (or SH [N,K,3] with sh_degree), viewmats [C,4,4] world-to-camera, Ks [C,3,3],
    features [N,D] or [C,N,D], backgrounds [C,3] or [3].

    camera_model: "pinhole" (default), "ortho" or "fisheye" (equidistant), as gsplat's; the lens
    map and its EWA Jacobian are docs/cameras.md's. Ks holds fx, fy, cx, cy for each.

    covars [N,3,3]: world-space covariances in place of quats and scales (pass those as None);
    projected by PyTorch (EWA, or the unscented transform with with_ut), differentiable in covars.
    with_ut: project through the unscented transform (3DGUT, as gsplat's with_ut=True; PyTorch,
    differentiable) instead of EWA, which the lens distortion coefficients need:
    radial_coeffs [C,6] (pinhole k1..k6) or [C,4] (fisheye k1..k4), tangential_coeffs [C,2]
    (p1 p2), thin_prism_coeffs [C,4] (s1..s4), gsplat's layout (docs/cameras.md).

    deterministic: the rasterizer's backward sums per-Gaussian gradients in a fixed order
    instead of with atomics, so gradients are bitwise reproducible (whatever the CPU thread
    count; on CUDA via the exact fp32 scalar backward for every precision). Slower; None follows
    torch.are_deterministic_algorithms_enabled().

    validate: check tensor values (finite, ranges, tile lists consistent) on CUDA in this call and
    its backward: a host sync per check, for debugging. None follows the global setting
    (gsrender.set_validation, GSRENDER_VALIDATE; off by default, so a CUDA call makes no host
    sync but binning's); False turns CUDA checks off for the call. The CPU always checks.
    """
    V.choice(backend, "backend", BACKENDS)
    opts = check_options(mode=mode, precision=precision, camera_model=camera_model,
                         tile_size=tile_size, near_plane=near_plane, far_plane=far_plane,
                         eps2d=eps2d, radius_clip=radius_clip, antialiased=antialiased,
                         weight_params=weight_params, deterministic=deterministic)
    check_inputs(means, quats, scales, opacities, colors, viewmats, Ks, width, height, sh_degree,
                 features, backgrounds, sh_channels=True, covars=covars)
    if backend != "auto" and means.device.type != backend:
        raise ValueError(f"backend={backend!r} but means is on {means.device}; move the inputs")
    timings: dict[str, float] = {}
    clock = _Clock(means.device, profile, timings)

    with clock("project"):
        radii, means2d, depths, conics, opac2d = project_gaussians(
            means, quats, scales, opacities, viewmats, Ks, width, height, opts,
            covars=covars, with_ut=with_ut, radial_coeffs=radial_coeffs,
            tangential_coeffs=tangential_coeffs, thin_prism_coeffs=thin_prism_coeffs)
    with clock("sh"):
        chans = raster_channels(means, colors, viewmats, depths, sh_degree, features)
        bg = background_channels(backgrounds, chans)
    with clock("bin"):
        tile_offsets, flatten_ids = bin_gaussians(means2d, radii, depths, conics, opac2d, width,
                                                  height, opts)
    with clock("raster_fwd"):
        render, alphas, stats, plan = composite(means2d, conics, opac2d, chans, depths, bg,
                                                tile_offsets, flatten_ids, width, height, opts)
    meta = {"radii": radii, "means2d": means2d, "depths": depths, "conics": conics,
            "opacities": opac2d, "tile_offsets": tile_offsets, "flatten_ids": flatten_ids,
            "n_intersections": flatten_ids.shape[0], "tile_width": -(-width // tile_size),
            "tile_height": -(-height // tile_size), "stats": stats, "plan": plan}
    if profile:
        meta["timings_ms"] = timings
    return render_output(render, alphas, features is not None, meta)


# ---------------------------------------------------------------------------------------------
# The pipeline's stages, in order: rasterize runs them in one process, gsrender.distributed
# runs the same ones with an exchange of projected Gaussians between colouring and binning.


class RasterOptions(NamedTuple):
    """rasterize's checked options (check_options), as the stages take them."""
    mode: str
    precision: str
    camera_model: str
    tile_size: int
    near_plane: float
    far_plane: float
    eps2d: float
    radius_clip: float
    antialiased: bool
    weight_params: list[float]  # (sigma, beta, w_bg) of weighted mode
    deterministic: bool


def check_options(*, mode, precision, camera_model, tile_size, near_plane, far_plane, eps2d,
                  radius_clip, antialiased, weight_params, deterministic) -> RasterOptions:
    """rasterize's options checked (errors name the argument) and normalised: floats as Python
    floats, deterministic=None as torch.are_deterministic_algorithms_enabled()."""
    V.choice(mode, "mode", MODES)
    V.choice(precision, "precision", PRECISIONS)
    V.choice(camera_model, "camera_model", CAMERA_MODELS)
    V.positive_int(tile_size, "tile_size", 256)
    near_plane = V.real(near_plane, "near_plane", finite=False)
    far_plane = V.real(far_plane, "far_plane", finite=False)
    eps2d = V.real(eps2d, "eps2d")
    radius_clip = V.real(radius_clip, "radius_clip")
    if eps2d < 0:
        raise ValueError(f"eps2d must be >= 0, got {eps2d}")
    if not isinstance(antialiased, bool):
        raise TypeError(f"antialiased must be a bool, got {type(antialiased).__name__}")
    if deterministic is None:
        deterministic = torch.are_deterministic_algorithms_enabled()
    elif not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool or None, got {type(deterministic).__name__}")
    if not isinstance(weight_params, (tuple, list)) or len(weight_params) != 3:
        raise ValueError(f"weight_params must be (sigma, beta, w_bg), got {weight_params!r}")
    weight_params = [V.real(v, f"weight_params[{i}]") for i, v in enumerate(weight_params)]
    if not (0 < near_plane < far_plane and math.isfinite(near_plane)):
        raise ValueError(f"near_plane and far_plane need 0 < near_plane < far_plane, got "
                         f"{near_plane}, {far_plane}")
    return RasterOptions(mode, precision, camera_model, tile_size, near_plane, far_plane, eps2d,
                         radius_clip, antialiased, weight_params, deterministic)


def project_gaussians(means, quats, scales, opacities, viewmats, Ks, width: int, height: int,
                      opts: RasterOptions, *, covars=None, with_ut: bool = False,
                      radial_coeffs=None, tangential_coeffs=None, thin_prism_coeffs=None):
    """Projection: N Gaussians into C cameras (gsrender/projection.py picks the kernel, covars=
    or the unscented transform) -> radii [C,N,2] int32, means2d [C,N,2], depths [C,N], conics
    [C,N,3], opacities2d [C,N]."""
    return projection.project(
        means.contiguous(), _contiguous(quats), _contiguous(scales), opacities.contiguous(),
        viewmats.contiguous(), Ks.contiguous(), width, height, opts.eps2d, opts.near_plane,
        opts.far_plane, opts.radius_clip, opts.antialiased, opts.camera_model, covars=covars,
        with_ut=with_ut, radial_coeffs=_contiguous(radial_coeffs),
        tangential_coeffs=_contiguous(tangential_coeffs),
        thin_prism_coeffs=_contiguous(thin_prism_coeffs))


def raster_channels(means, colors, viewmats, depths, sh_degree: int | None, features=None):
    """Colouring: the channels the rasterizer composites, [C,N,4+D] = RGB (SH evaluated towards
    each camera's centre with sh_degree, else colors [N,3] or [C,N,3]), the depth, then the
    features ([N,D] or [C,N,D]). depths [C,N] is the projection's."""
    C, N = viewmats.shape[0], means.shape[0]
    if sh_degree is not None:
        campos = geometry.camera_centers(viewmats)  # [C, 3]
    if sh_degree is not None and means.device.type == "cpu":
        # one pass writes colour, depth and features (no [C, N, 3] temporaries, no cat)
        return ops.sh_channels(sh_degree, means.contiguous(), campos.contiguous(),
                               colors.contiguous(), depths, features)  # [C, N, 4 + D]
    # colours given, or CUDA (no fused kernel there): tensor ops
    if sh_degree is not None:
        dirs = means[None, :, :] - campos[:, None, :]  # [C, N, 3]
        rgb = torch.clamp_min(ops.sh(sh_degree, dirs.contiguous(), colors.contiguous()) + 0.5, 0.0)
    else:
        rgb = colors.expand(C, N, 3) if colors.dim() == 2 else colors
    chans = [rgb, depths[..., None]]
    if features is not None:
        chans.append(features.expand(C, N, features.shape[-1]) if features.dim() == 2 else features)
    return torch.cat(chans, dim=-1).contiguous()  # [C, N, 4 + D]


def background_channels(backgrounds, chans):
    """backgrounds [C,3] or [3] (or None) -> [C,4+D] to composite behind chans [C,N,4+D]: the
    RGB, zero behind the depth and the features."""
    if backgrounds is None:
        return None
    C = chans.shape[0]
    bg3 = backgrounds.expand(C, 3) if backgrounds.dim() == 1 else backgrounds
    return torch.cat([bg3, bg3.new_zeros(C, chans.shape[-1] - 3)], dim=-1).contiguous()


def bin_gaussians(means2d, radii, depths, conics, opacities2d, width: int, height: int,
                  opts: RasterOptions):
    """Binning: each tile's Gaussians (exact ellipse test), depth-sorted in sorted mode ->
    tile_offsets [C,tiles_y,tiles_x] int32, flatten_ids [M] int32. Not differentiable."""
    return ops.bin_tiles(means2d.detach().contiguous(), radii.contiguous(),
                         depths.detach().contiguous(), width, height, opts.tile_size,
                         opts.mode == "sorted", conics.detach().contiguous(),
                         opacities2d.detach().contiguous())


def composite(means2d, conics, opacities2d, chans, depths, backgrounds, tile_offsets,
              flatten_ids, width: int, height: int, opts: RasterOptions):
    """Rasterization: the binned Gaussians composited per pixel -> render [C,H,W,4+D], alphas
    [C,H,W,1], stats, plan (ops.rasterize's; render_output splits render)."""
    render, alphas, _, _, stats, plan = ops.rasterize(
        means2d.contiguous(), conics.contiguous(), opacities2d.contiguous(), chans.contiguous(),
        depths.contiguous(), backgrounds, tile_offsets, flatten_ids, width, height,
        opts.tile_size, MODES.index(opts.mode), opts.weight_params, opts.precision,
        opts.deterministic)
    return render, alphas, stats, plan


def render_output(render, alphas, with_features: bool, meta: dict) -> RenderOutput:
    """composite's render [C,H,W,4+D] split into the RenderOutput's colours, depths, features."""
    colors, depths, features = ops.split_render(render, with_features)
    return RenderOutput(colors=colors, depths=depths, alphas=alphas, features=features, meta=meta)


def _contiguous(t):
    return None if t is None else t.contiguous()


def raster_plan(meta: dict) -> dict:
    """The plan rasterize ran and its backward runs, from meta["plan"] (a CPU tensor, so
    reading it costs no device sync): {"forward": name, "backward": name} (names: ops.KERNELS,
    e.g. "mma_f16", "scalar", "matrix_det"), the tile grid ("tile_size", "tiles_x", "tiles_y",
    "tiles" = cameras·tiles_y·tiles_x) and each kernel's device workspace in bytes
    ("forward_workspace", "backward_workspace"; 0 for kernels that take none, e.g. every CPU
    one). Keys: ops.PLAN_FIELDS."""
    return ops.plan_info(meta["plan"])


def packing_efficiency(meta: dict) -> float:
    """Useful (contributing) pairs / pairs the kernel evaluated after packing (docs/design.md §5.2)."""
    s = meta["stats"].sum(0)
    return float(s[2]) / max(float(s[1]), 1.0)


class _Stage:
    """Times one stage (synchronising CUDA so each stage is measured alone)."""

    def __init__(self, device: torch.device, out: dict, name: str):
        self.device, self.out, self.name = device, out, name

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.out[self.name] = (time.perf_counter() - self.t0) * 1e3


class _Clock:
    """Stage timer for profile=True; a no-op context otherwise (torch.compile-friendly)."""

    def __init__(self, device: torch.device, enabled: bool, out: dict):
        self.device, self.enabled, self.out = device, enabled, out

    def __call__(self, name: str):
        return _Stage(self.device, self.out, name) if self.enabled else contextlib.nullcontext()
