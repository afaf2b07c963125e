"""gsplat 1.5 front door: ``rasterization(...)`` with gsplat's signature and return values, on top
of gsrender.rasterize (gsrender.distributed.rasterize with ``distributed=True``). Swap
``from gsplat import rasterization`` for ``from gsrender.compat.gsplat import rasterization`` and
nothing else changes.

Accepted and honoured: every argument of the signature below, ``camera_model`` "pinhole", "ortho"
and "fisheye" (docs/cameras.md), ``with_ut=True`` (the unscented transform, 3DGUT) with the lens
distortion coefficients ``radial_coeffs`` [C,6] (pinhole) / [C,4] (fisheye), ``tangential_coeffs``
[C,2] and ``thin_prism_coeffs`` [C,4] (which, as in gsplat, need with_ut=True), ``covars`` [N,3,3]
in place of quats and scales (gradients flow to covars; with or without with_ut),
``distributed=True`` (each rank passes its own Gaussians and cameras, as in gsplat; per-camera
colours are not accepted there), and the neutral values (None / False / GLOBAL) of
``ftheta_coeffs``, ``rolling_shutter``, ``viewmats_rs``, ``global_z_order``, ``with_eval3d``,
``segmented``.

Not supported (NotImplementedError, with the reason):
- camera_model="ftheta": no f-theta lens model.
- rolling_shutter other than GLOBAL, viewmats_rs: every pixel is rendered from one pose.
- with_eval3d=True: Gaussians are evaluated in 2D (EWA), not along 3D rays.
- segmented=True: a gsplat memory layout for its CUDA sort; gsrender bins differently.
- sparse_grad=True: gradients are dense tensors.

Differences from gsplat (documented, deliberate):
- ``absgrad``: meta["means2d"].absgrad is |∂L/∂means2d| of the *summed* gradient (a tensor hook),
  not gsplat's sum over pixels of per-pixel |∂L/∂means2d|; both are ≥ |grad| and vanish together.
- ``packed=True`` renders exactly like packed=False; the meta tensors are then packed ([nnz, ...]
  over visible (camera, Gaussian) pairs, with "camera_ids"/"gaussian_ids"), and meta["means2d"]
  is a leaf whose .grad (and .absgrad) a hook fills from the unpacked tensor's gradient.
- channel_chunk only bounds gsplat's memory; gsrender renders any channel count in one pass.
- Radii are gsrender's opacity-aware ones (docs/design.md §3), not gsplat's 3σ ones.
- with_ut=True keeps packed=True and takes covars (gsplat needs packed=False and quats + scales
  there); the unscented projection is differentiable (PyTorch autograd). Its culling rule is
  docs/cameras.md's (a Gaussian with any sigma point outside the lens's valid region is culled).
"""
from __future__ import annotations

import torch

from gsrender.contract import CAMERA_MODELS
from gsrender.geometry import camera_centers
from gsrender.render import rasterize as _rasterize

RENDER_MODES = ("RGB", "D", "ED", "RGB+D", "RGB+ED")
RASTERIZE_MODES = ("classic", "antialiased")
# gsplat options that gsrender does not implement, accepted at their neutral value only; the
# reason each raises otherwise.
_NEUTRAL_OPTIONS = {
    "segmented": "a gsplat memory layout for its CUDA sort; gsrender bins differently",
    "with_eval3d": "Gaussians are evaluated in 2D (EWA), not along 3D rays",
    "ftheta_coeffs": "no f-theta lens model",
    "rolling_shutter": "every pixel is rendered from one pose (no rolling shutter)",
    "viewmats_rs": "every pixel is rendered from one pose (no rolling shutter)",
    "global_z_order": "gsrender sorts by depth per tile",
}


def _is_neutral(value) -> bool:
    # rolling_shutter's neutral value is an enum member named GLOBAL in gsplat
    return value is None or value is False or getattr(value, "name", None) == "GLOBAL"


def _check_supported(camera_model, sparse_grad, extra: dict) -> None:
    if camera_model not in CAMERA_MODELS:
        raise NotImplementedError(f"camera_model={camera_model!r} is not supported by gsrender "
                                  f"(one of {CAMERA_MODELS}; no f-theta lens model)")
    if sparse_grad:
        raise NotImplementedError("sparse_grad=True is not supported by gsrender (dense gradients)")
    for name, value in extra.items():
        if name not in _NEUTRAL_OPTIONS:
            raise NotImplementedError(f"rasterization option {name!r} is not supported by gsrender")
        if not _is_neutral(value):
            raise NotImplementedError(f"rasterization option {name}={value!r} is not supported by "
                                      f"gsrender: {_NEUTRAL_OPTIONS[name]}")


def _sh_per_camera(sh_degree: int, coeffs: torch.Tensor, means, viewmats) -> torch.Tensor:
    """gsplat's per-camera SH coefficients [C,N,K,3] -> colours [C,N,3] (gsrender takes [N,K,3])."""
    from gsrender import ops
    dirs = means[None, :, :] - camera_centers(viewmats)[:, None, :]  # [C, N, 3]
    rgb = [ops.sh(sh_degree, dirs[c:c + 1].contiguous(), coeffs[c].contiguous())
           for c in range(coeffs.shape[0])]
    return torch.clamp_min(torch.cat(rgb, dim=0) + 0.5, 0.0)  # [C, N, 3]


def _absgrad_hook(t: torch.Tensor):
    def hook(grad):
        prev = getattr(t, "absgrad", None)
        t.absgrad = grad.abs() if prev is None else prev + grad.abs()
    return hook


def _pack(meta: dict, absgrad: bool) -> dict:
    """Unpacked [C,N,...] meta -> gsplat's packed layout over visible (camera, Gaussian) pairs."""
    full = meta["means2d"]  # [C, N, 2]
    sel = (meta["radii"] > 0).all(dim=-1)  # [C, N]
    camera_ids, gaussian_ids = torch.where(sel)  # [nnz], [nnz]
    packed = full.detach()[sel].requires_grad_(full.requires_grad)  # [nnz, 2] leaf
    if full.requires_grad:
        def hook(grad):
            g = grad[sel]
            packed.grad = g if packed.grad is None else packed.grad + g
            if absgrad:
                prev = getattr(packed, "absgrad", None)
                packed.absgrad = g.abs() if prev is None else prev + g.abs()
        full.register_hook(hook)
    out = dict(meta)
    out.update(radii=meta["radii"][sel], means2d=packed, depths=meta["depths"][sel],
               conics=meta["conics"][sel], opacities=meta["opacities"][sel],
               camera_ids=camera_ids, gaussian_ids=gaussian_ids)
    return out


def rasterization(means, quats, scales, opacities, colors, viewmats, Ks, width: int, height: int,
                  near_plane: float = 0.01, far_plane: float = 1e10, radius_clip: float = 0.0,
                  eps2d: float = 0.3, sh_degree: int | None = None, packed: bool = True,
                  tile_size: int = 16, backgrounds=None, render_mode: str = "RGB",
                  sparse_grad: bool = False, absgrad: bool = False,
                  rasterize_mode: str = "classic", channel_chunk: int = 32,
                  distributed: bool = False, camera_model: str = "pinhole", covars=None,
                  with_ut: bool = False, radial_coeffs=None, tangential_coeffs=None,
                  thin_prism_coeffs=None, **kwargs):
    """gsplat.rasterization (the module docstring lists what is supported). Shapes: means [N,3], quats [N,4] wxyz,
    scales [N,3] (both ignored when covars [N,3,3] is given, as in gsplat), opacities [N],
    colors [N,D] / [C,N,D] (any D; D != 3 is rendered through gsrender's features path) or SH
    [N,K,3] / [C,N,K,3] with sh_degree, viewmats [C,4,4], Ks [C,3,3], backgrounds [C,D] or [D]
    (D + 0 depth channels, as in gsplat), radial_coeffs [C,6] / [C,4], tangential_coeffs [C,2],
    thin_prism_coeffs [C,4] (with with_ut=True).

    Returns (render_colors [C,H,W,X], render_alphas [C,H,W,1], meta) where X = D for "RGB",
    1 for "D"/"ED" and D+1 for "RGB+D"/"RGB+ED"; D is the expected depth Σ w z, ED = D / alpha.
    """
    coeffs = {"radial_coeffs": radial_coeffs, "tangential_coeffs": tangential_coeffs,
              "thin_prism_coeffs": thin_prism_coeffs}
    _check_supported(camera_model, sparse_grad, kwargs)
    if render_mode not in RENDER_MODES:
        raise ValueError(f"render_mode must be one of {RENDER_MODES}, got {render_mode!r}")
    if rasterize_mode not in RASTERIZE_MODES:
        raise ValueError(f"rasterize_mode must be one of {RASTERIZE_MODES}, got {rasterize_mode!r}")
    if not isinstance(colors, torch.Tensor):
        raise TypeError(f"colors must be a torch.Tensor, got {type(colors).__name__}")
    C, N = viewmats.shape[0], means.shape[0]
    want_rgb = render_mode in ("RGB", "RGB+D", "RGB+ED")

    native_colors, features, native_sh, bg_native = colors, None, sh_degree, None
    if not want_rgb:
        # depth-only modes ignore colours (as gsplat does); render a dummy RGB
        native_colors, native_sh = means.new_zeros(N, 3), None
    elif sh_degree is not None and colors.dim() == 4:
        native_colors, native_sh = _sh_per_camera(sh_degree, colors, means, viewmats), None
    elif sh_degree is None and colors.shape[-1] != 3:
        native_colors, features = means.new_zeros(N, 3), colors
    if want_rgb and features is None:
        bg_native = backgrounds

    if distributed:
        from gsrender.distributed import rasterize as render_fn
    else:
        render_fn = _rasterize
    if covars is not None:
        quats, scales = None, None
    out = render_fn(means, quats, scales, opacities, native_colors, viewmats, Ks, width, height,
                    sh_degree=native_sh, features=features, backgrounds=bg_native,
                    near_plane=near_plane, far_plane=far_plane, eps2d=eps2d,
                    antialiased=rasterize_mode == "antialiased", camera_model=camera_model,
                    tile_size=tile_size, radius_clip=radius_clip, covars=covars, with_ut=with_ut,
                    **coeffs)
    alphas = out.alphas  # [C, H, W, 1]
    if features is not None:
        rgb = out.features  # [C, H, W, D]
        if backgrounds is not None:
            # sorted compositing is Σ w f + T_final·bg, and T_final = 1 − alpha
            bg = backgrounds.expand(C, rgb.shape[-1]) if backgrounds.dim() == 1 else backgrounds
            rgb = rgb + (1.0 - alphas) * bg[:, None, None, :]
    else:
        rgb = out.colors  # [C, H, W, 3]
    depth = out.depths  # [C, H, W, 1]
    if render_mode.endswith("ED"):
        depth = depth / alphas.clamp(min=1e-10)
    if render_mode == "RGB":
        render = rgb
    elif render_mode in ("D", "ED"):
        render = depth
    else:
        render = torch.cat([rgb, depth], dim=-1)

    meta = dict(out.meta)
    means2d = meta["means2d"]  # [C, N, 2]
    if absgrad and not packed and means2d.requires_grad:
        means2d.register_hook(_absgrad_hook(means2d))
    meta.update(width=width, height=height, tile_size=tile_size, n_cameras=C,
                isect_offsets=meta["tile_offsets"], camera_ids=None, gaussian_ids=None)
    if packed:
        meta = _pack(meta, absgrad)
    return render, alphas, meta
