"""Typed wrappers over torch.ops.gsrender.*, with fake (meta) impls for torch.compile and autograd
whose backward calls the *_bwd ops. The kernels' math lives in csrc/; nothing is recomputed here."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from gsrender import _C  # loads the library: op schemas and kernels
from gsrender import validate as V
from gsrender.contract import CAMERA_MODELS, MODES

_ops = torch.ops.gsrender

# rasterize's mode values (contract.MODES holds the names, by value)
SORTED, WEIGHTED = MODES.index("sorted"), MODES.index("weighted")
# rasterize_fwd's precision strings and the kernels its launch plan names, by the plan's values
# (RasterPrecision / RasterKernel in csrc/include/gsrender/raster_plan.h, read from there).
PRECISIONS = tuple(_C.raster_precisions())
KERNELS = tuple(_C.raster_kernels())
# the entries of rasterize's plan tensor, in order (RasterPlan, store_plan in raster_plan.h)
PLAN_FIELDS = tuple(_C.raster_plan_fields())


def plan_info(plan: torch.Tensor) -> dict:
    """rasterize's plan output ([len(PLAN_FIELDS)] int64 on the CPU) -> {field: value}: the
    forward and backward kernels by name, the tile grid (tile_size, tiles_x, tiles_y, tiles in
    all) and each kernel's device workspace in bytes. Reads a CPU tensor: no device sync."""
    info = dict(zip(PLAN_FIELDS, plan.tolist(), strict=True))
    info["forward"], info["backward"] = KERNELS[info["forward"]], KERNELS[info["backward"]]
    return info


# ---------------------------------------------------------------------------------------------
# projection



def camera_model_index(camera_model: str) -> int:
    """The op's camera_model value of a model name (docs/cameras.md)."""
    V.choice(camera_model, "camera_model", CAMERA_MODELS)
    return CAMERA_MODELS.index(camera_model)


def project(means, quats, scales, opacities, viewmats, Ks, width: int, height: int, eps2d: float,
            near_plane: float, far_plane: float, radius_clip: float, antialiased: bool,
            camera_model: str = "pinhole"):
    """-> radii [C,N,2] int32, means2d [C,N,2], depths [C,N], conics [C,N,3], opacities2d [C,N]."""
    return _ops.project_fwd(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d,
                            near_plane, far_plane, radius_clip, antialiased,
                            camera_model_index(camera_model))


@torch.library.register_fake("gsrender::project_fwd")
def _project_fake(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d, near_plane,
                  far_plane, radius_clip, antialiased, camera_model=0):
    C, N = viewmats.shape[0], means.shape[0]
    f = means.new_empty
    return (means.new_empty((C, N, 2), dtype=torch.int32), f((C, N, 2)), f((C, N)), f((C, N, 3)),
            f((C, N)))


def _project_setup(ctx, inputs, output):
    means, quats, scales, opacities, viewmats, Ks, width, height, eps2d = inputs[:9]
    antialiased = inputs[12]
    camera_model = inputs[13] if len(inputs) > 13 else 0
    ctx.save_for_backward(means, quats, scales, opacities, viewmats, Ks, output[0])
    ctx.args = (width, height, eps2d, antialiased, camera_model)


def _project_backward(ctx, v_radii, v_means2d, v_depths, v_conics, v_opacities2d):
    means, quats, scales, opacities, viewmats, Ks, radii = ctx.saved_tensors
    width, height, eps2d, antialiased, camera_model = ctx.args
    C, N = viewmats.shape[0], means.shape[0]
    z = lambda g, shape: means.new_zeros(shape) if g is None else g.contiguous()
    v_means, v_quats, v_scales, v_opacities, v_viewmats = _ops.project_bwd(
        means, quats, scales, opacities, viewmats, Ks, width, height, eps2d, antialiased, radii,
        z(v_means2d, (C, N, 2)), z(v_depths, (C, N)), z(v_conics, (C, N, 3)),
        z(v_opacities2d, (C, N)), camera_model)
    return (v_means, v_quats, v_scales, v_opacities, v_viewmats, None, None, None, None, None, None,
            None, None, None)


torch.library.register_autograd("gsrender::project_fwd", _project_backward,
                                setup_context=_project_setup)


# ---------------------------------------------------------------------------------------------
# spherical harmonics


def sh(degree: int, dirs, coeffs):
    """Raw SH colour (no +0.5): dirs [C,N,3], coeffs [N,K,3] -> [C,N,3]."""
    return _ops.sh_fwd(degree, dirs, coeffs)


@torch.library.register_fake("gsrender::sh_fwd")
def _sh_fake(degree, dirs, coeffs):
    return dirs.new_empty(dirs.shape)


def _sh_setup(ctx, inputs, output):
    degree, dirs, coeffs = inputs
    ctx.save_for_backward(dirs, coeffs)
    ctx.degree = degree


def _sh_backward(ctx, v_colors):
    dirs, coeffs = ctx.saved_tensors
    v_dirs, v_coeffs = _ops.sh_bwd(ctx.degree, dirs, coeffs, v_colors.contiguous())
    return None, v_dirs, v_coeffs


torch.library.register_autograd("gsrender::sh_fwd", _sh_backward, setup_context=_sh_setup)


def sh_channels(degree: int, means, campos, coeffs, depths, features=None):
    """The raster's channels in one pass (CPU): [C,N,4+D] = clamp_min(SH(means − campos) + 0.5, 0)
    (the 3DGS colour), the depth, then the features. means [N,3], campos [C,3] (camera centres),
    coeffs [N,K,3], depths [C,N], features [N,D] (every camera's) or [C,N,D] or None."""
    return _ops.sh_channels_fwd(degree, means, campos, coeffs, depths, features)


@torch.library.register_fake("gsrender::sh_channels_fwd")
def _sh_channels_fake(degree, means, campos, coeffs, depths, features):
    D = 0 if features is None else features.shape[-1]
    return means.new_empty((campos.shape[0], means.shape[0], 4 + D))


def _sh_channels_setup(ctx, inputs, output):
    degree, means, campos, coeffs, depths, features = inputs
    ctx.save_for_backward(means, campos, coeffs)
    ctx.degree = degree
    ctx.features_dim = None if features is None else features.dim()


def _sh_channels_backward(ctx, v_channels):
    means, campos, coeffs = ctx.saved_tensors
    v_means = v_campos = v_coeffs = v_features = None
    if any(ctx.needs_input_grad[1:4]):
        v_means, v_campos, v_coeffs = _ops.sh_channels_bwd(ctx.degree, means, campos, coeffs,
                                                           v_channels.contiguous())
    if ctx.features_dim is not None:  # a shared [N,D] feature is every camera's: summed over C
        v_features = v_channels[..., 4:]
        if ctx.features_dim == 2:  # (one camera: its view, not a sum that copies [N, D])
            v_features = v_features[0] if v_features.shape[0] == 1 else v_features.sum(0)
    return None, v_means, v_campos, v_coeffs, v_channels[..., 3], v_features


torch.library.register_autograd("gsrender::sh_channels_fwd", _sh_channels_backward,
                                setup_context=_sh_channels_setup)


# ---------------------------------------------------------------------------------------------
# binning (no gradient)


@V.per_call
def bin_tiles(means2d, radii, depths, width: int, height: int, tile_size: int, sort: bool,
              conics=None, opacities=None, *, validate: bool | None = None):
    """-> tile_offsets [C,TH,TW] int32, flatten_ids [M] int32 (c*N + n).
    With conics [C,N,3] and opacities [C,N] (exact binning) a Gaussian is listed only in the tiles
    its α ≥ 1/255 support ellipse meets, not every tile of its radii box: the same images and
    gradients from every raster op, on shorter lists. validate: as rasterize's."""
    return _ops.bin_tiles(means2d, radii, depths, width, height, tile_size, sort, conics, opacities)


@torch.library.register_fake("gsrender::bin_tiles")
def _bin_tiles_fake(means2d, radii, depths, width, height, tile_size, sort, conics=None,
                    opacities=None):
    C = means2d.shape[0]
    th, tw = -(-height // tile_size), -(-width // tile_size)
    m = torch.library.get_ctx().new_dynamic_size()
    return (means2d.new_empty((C, th, tw), dtype=torch.int32),
            means2d.new_empty((m,), dtype=torch.int32))


# ---------------------------------------------------------------------------------------------
# rasterization


@V.per_call
def rasterize(means2d, conics, opacities, colors, depths, backgrounds, tile_offsets, flatten_ids,
              width: int, height: int, tile_size: int, mode: int, weight_params: Sequence[float],
              precision: str = "auto", deterministic: bool = False, *,
              validate: bool | None = None):
    """-> render [C,H,W,CH], alphas [C,H,W,1], last_ids [C,H,W] int32, aux [C,H,W], stats [C,3],
    plan [len(PLAN_FIELDS)] int64 (CPU).
    colors [C,N,CH]: every composited channel (render.py packs RGB, the depth z, then the
    features: CH = 4 + D), so render holds them in that order. aux is what the backward needs per pixel:
    sorted mode the final transmittance T_final, weighted mode the normaliser Σw + w_bg.
    precision: one of PRECISIONS; the op plans the forward and backward kernels from it once
    (plan_info(plan) reads them, with the tile grid and workspaces) and the backward runs the
    planned one.
    deterministic: the backward reduces in a fixed order (bitwise-reproducible gradients).
    validate: on CUDA, check the tile lists' values (a host sync) in this call and its backward
    (None: the global setting, gsrender.set_validation); the CPU always checks."""
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool, got {type(deterministic).__name__}")
    return _ops.rasterize_fwd(means2d, conics, opacities, colors, depths, backgrounds,
                              tile_offsets, flatten_ids, width, height, tile_size, mode,
                              list(weight_params), precision, deterministic)


@torch.library.register_fake("gsrender::rasterize_fwd")
def _rasterize_fake(means2d, conics, opacities, colors, depths, backgrounds, tile_offsets,
                    flatten_ids, width, height, tile_size, mode, weight_params, precision="auto",
                    deterministic=False):
    C, CH = means2d.shape[0], colors.shape[2]
    f = means2d.new_empty
    return (f((C, height, width, CH)), f((C, height, width, 1)),
            f((C, height, width), dtype=torch.int32), f((C, height, width)),
            f((C, 3), dtype=torch.int64),
            torch.empty(len(PLAN_FIELDS), dtype=torch.int64, device="cpu"))


def _rasterize_setup(ctx, inputs, output):
    (means2d, conics, opacities, colors, depths, backgrounds, tile_offsets, flatten_ids, width,
     height, tile_size, mode, weight_params, _, _) = inputs
    render, alphas, last_ids, aux, _, plan = output
    ctx.has_bg = backgrounds is not None
    ctx.save_for_backward(means2d, conics, opacities, colors, depths,
                          backgrounds if backgrounds is not None else means2d.new_empty(0),
                          tile_offsets, flatten_ids, render, alphas, last_ids, aux, plan)
    ctx.args = (width, height, tile_size, mode, list(weight_params))
    ctx.validate = V.call_setting()  # a validate=True forward validates its backward too


def _rasterize_backward(ctx, v_render, v_alphas, v_last_ids, v_aux, v_stats, v_plan):
    (means2d, conics, opacities, colors, depths, backgrounds, tile_offsets, flatten_ids, render,
     alphas, last_ids, aux, plan) = ctx.saved_tensors
    width, height, tile_size, mode, weight_params = ctx.args
    v_render = torch.zeros_like(render) if v_render is None else v_render.contiguous()
    v_alphas = torch.zeros_like(alphas) if v_alphas is None else v_alphas.contiguous()
    with V.scope(ctx.validate):
        v_means2d, v_conics, v_opacities, v_colors, v_depths, v_backgrounds = _ops.rasterize_bwd(
            means2d, conics, opacities, colors, depths, backgrounds if ctx.has_bg else None,
            tile_offsets, flatten_ids, width, height, tile_size, mode, weight_params, render,
            alphas, last_ids, aux, v_render, v_alphas, plan)
    return (v_means2d, v_conics, v_opacities, v_colors, v_depths,
            v_backgrounds if ctx.has_bg else None, None, None, None, None, None, None, None, None,
            None)


torch.library.register_autograd("gsrender::rasterize_fwd", _rasterize_backward,
                                setup_context=_rasterize_setup)


def split_render(render, has_features: bool):
    """rasterize's render [C,H,W,4+D] -> colors [C,H,W,3], depths [C,H,W,1], features [C,H,W,D]
    (None when not has_features): views by torch.split, whose backward writes one [C,H,W,4+D]
    gradient (a concatenation, zeros for the views nobody used). Separate slices would each
    build a zero-filled full-size gradient and autograd would add them: at D = 64, 512², two
    71 MB buffers filled, copied into and summed per training step."""
    colors, depths, features = torch.split(render, [3, 1, render.shape[-1] - 4], dim=-1)
    return colors, depths, features if has_features else None


@torch.library.register_fake("gsrender::rasterize_bwd")
def _rasterize_bwd_fake(means2d, conics, opacities, colors, depths, backgrounds, tile_offsets,
                        flatten_ids, width, height, tile_size, mode, weight_params, render, alphas,
                        last_ids, aux, v_render, v_alphas, plan):
    C, N, CH = colors.shape
    f = means2d.new_empty
    return f((C, N, 2)), f((C, N, 3)), f((C, N)), f((C, N, CH)), f((C, N)), f((C, CH))


@torch.library.register_fake("gsrender::project_bwd")
def _project_bwd_fake(means, quats, scales, opacities, viewmats, Ks, width, height, eps2d,
                      antialiased, radii, v_means2d, v_depths, v_conics, v_opacities2d,
                      camera_model=0):
    return (means.new_empty(means.shape), quats.new_empty(quats.shape),
            scales.new_empty(scales.shape), opacities.new_empty(opacities.shape),
            viewmats.new_empty(viewmats.shape))


@torch.library.register_fake("gsrender::sh_bwd")
def _sh_bwd_fake(degree, dirs, coeffs, v_colors):
    return dirs.new_empty(dirs.shape), coeffs.new_empty(coeffs.shape)


@torch.library.register_fake("gsrender::sh_channels_bwd")
def _sh_channels_bwd_fake(degree, means, campos, coeffs, v_channels):
    return means.new_empty(means.shape), campos.new_empty(campos.shape), coeffs.new_empty(coeffs.shape)


# ---------------------------------------------------------------------------------------------
# SplitGS-Loc: composition-weight statistics (no gradient)


@V.per_call
def weight_stats(means2d, conics, opacities, depths, tile_offsets, flatten_ids, width: int,
                 height: int, tile_size: int, tau_s: float, top_k: int, *,
                 validate: bool | None = None):
    """Sorted-mode weights w = α·T over C views -> w_sum [N], w_max [N], n_views [N] int32 (views
    with w > tau_s at some pixel), topk_ids [C,H,W,top_k] int32 (-1 = none), topk_weights
    [C,H,W,top_k] (descending). validate: as rasterize's."""
    return _ops.weight_stats(means2d, conics, opacities, depths, tile_offsets, flatten_ids, width,
                             height, tile_size, float(tau_s), int(top_k))


@torch.library.register_fake("gsrender::weight_stats")
def _weight_stats_fake(means2d, conics, opacities, depths, tile_offsets, flatten_ids, width,
                       height, tile_size, tau_s, top_k):
    C, N = means2d.shape[0], means2d.shape[1]
    f = means2d.new_empty
    return (f((N,)), f((N,)), f((N,), dtype=torch.int32),
            f((C, height, width, top_k), dtype=torch.int32), f((C, height, width, top_k)))


# ---------------------------------------------------------------------------------------------
# VODA: depth-aware contributors (no gradient: integer ids plus weights/depths read as data)


def mask_to_pixels(mask):
    """[C,H,W] bool -> [C,P,2] int32 (x, y) of the True pixels, row-major, padded with (-1, -1)
    to the largest count over cameras."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() != 3:
        raise ValueError("pixels: a mask must be a [C,H,W] bool tensor")
    C = mask.shape[0]
    per_cam = [torch.nonzero(m).flip(-1).to(torch.int32) for m in mask]  # (y, x) -> (x, y)
    P = max((p.shape[0] for p in per_cam), default=0)
    out = torch.full((C, P, 2), -1, dtype=torch.int32, device=mask.device)
    for c, p in enumerate(per_cam):
        out[c, : p.shape[0]] = p
    return out


@V.per_call
def contributors(means2d, conics, opacities, depths, tile_offsets, flatten_ids, width: int,
                 height: int, tile_size: int, pixels=None, K_max: int = 32, tau_rel: float = 0.03,
                 tau_abs: float = 0.0, *, validate: bool | None = None):
    """Per-pixel front-to-back contributors and depth clusters (schema comment in
    csrc/ops/gsrender.cpp). pixels: None (every pixel, row-major), [C,P,2] int32 (x, y) or a
    [C,H,W] bool mask (converted with mask_to_pixels).
    -> ids [C,P,K] int32, weights [C,P,K], zs [C,P,K], clusters [C,P,K] int32, counts [C,P]
    int32, n_render [C,P] int32. validate: as rasterize's (on CUDA, the pixels' range check)."""
    if isinstance(pixels, torch.Tensor) and pixels.dtype == torch.bool:
        if tuple(pixels.shape) != (means2d.shape[0], height, width):
            raise ValueError(f"pixels: a mask must have shape [C,H,W]=({means2d.shape[0]}, "
                             f"{height}, {width}), got {tuple(pixels.shape)}")
        pixels = mask_to_pixels(pixels)
    return _ops.contributors(means2d, conics, opacities, depths, tile_offsets, flatten_ids, width,
                             height, tile_size, pixels, int(K_max), float(tau_rel), float(tau_abs))


@torch.library.register_fake("gsrender::contributors")
def _contributors_fake(means2d, conics, opacities, depths, tile_offsets, flatten_ids, width, height,
                       tile_size, pixels, K_max, tau_rel, tau_abs):
    C = means2d.shape[0]
    P = height * width if pixels is None else pixels.shape[1]
    f, i32 = means2d.new_empty, torch.int32
    return (f((C, P, K_max), dtype=i32), f((C, P, K_max)), f((C, P, K_max)),
            f((C, P, K_max), dtype=i32), f((C, P), dtype=i32), f((C, P), dtype=i32))


# ---------------------------------------------------------------------------------------------
# SSIM map (the training loss; CPU kernel)


def ssim_map(x, y, window, c1: float, c2: float):
    """SSIM per pixel and channel of images x, y [B,H,W,CH] with the Gaussian window [K]."""
    return _ops.ssim_fwd(x, y, window, c1, c2)[0]


@torch.library.register_fake("gsrender::ssim_fwd")
def _ssim_fake(x, y, window, c1, c2):
    B, H, W, CH = x.shape
    return x.new_empty(x.shape), x.new_empty((5, B * CH, H, W))


@torch.library.register_fake("gsrender::ssim_bwd")
def _ssim_bwd_fake(x, y, window, c1, c2, moments, v_ssim, y_grad):
    return x.new_empty(x.shape), x.new_empty((x.shape[0] if y_grad else 0, *x.shape[1:]))


def _ssim_setup(ctx, inputs, output):
    x, y, window, ctx.c1, ctx.c2 = inputs
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)  # no zero gradient of the moments (5 images) every call
    ctx.save_for_backward(x, y, window, output[1])


def _ssim_backward(ctx, v_ssim, v_moments):
    if v_ssim is None:
        return None, None, None, None, None
    x, y, window, moments = ctx.saved_tensors
    v_x, v_y = _ops.ssim_bwd(x, y, window, ctx.c1, ctx.c2, moments, v_ssim.contiguous(),
                             ctx.needs_input_grad[1])
    # no gradient to the window: the SSIM's is a constant
    return v_x, v_y if ctx.needs_input_grad[1] else None, None, None, None


torch.library.register_autograd("gsrender::ssim_fwd", _ssim_backward, setup_context=_ssim_setup)
