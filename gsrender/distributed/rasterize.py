"""Rendering with the Gaussians and the cameras sharded over torch.distributed ranks.

Each rank holds a shard of the Gaussians and its own cameras. The cameras are all-gathered (a few
floats each); every rank projects its own Gaussians into every camera and evaluates their colours
there; an all-to-all then sends, for each camera, the projected Gaussians visible in it (means2d,
conics, opacities, depths, colours, features, radii) to the rank that owns the camera, which bins
and rasterizes them. The exchange is differentiable (exchange.py): the backward routes each
Gaussian's screen-space gradients to its owner, which back-propagates through projection and SH.
The images and gradients are those of a single-process render of the union of the shards.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from gsrender import ops, projection, validate
from gsrender import render as R
from gsrender.contract import DEFAULT_WEIGHT_PARAMS, MODES
from gsrender.distributed.comm import all_gather_rows, all_gather_rows_autograd
from gsrender.distributed.exchange import all_to_all_rows, all_to_all_rows_autograd, exchange_counts

# Row layout of an exchanged projected Gaussian: means2d (2), conic (3), opacity (1), then the
# raster channels (R.raster_channels: RGB (3), depth (1), the D features). Radii and the camera
# index travel as a separate int32 row.
_M2D, _CON, _OPA, _CHANS = slice(0, 2), slice(2, 5), 5, slice(6, None)
_DEP = 6 + 3  # the depth channel


def _options_vector(width, height, sh_degree, colors, features, opts: R.RasterOptions,
                    grad_gauss, grad_cams, ordered, lens_flags, device):
    k = colors.shape[1] if sh_degree is not None else 0
    v = [width, height, -1 if sh_degree is None else sh_degree, k,
         0 if features is None else features.shape[-1], MODES.index(opts.mode), opts.tile_size,
         ops.PRECISIONS.index(opts.precision), opts.near_plane, opts.far_plane, opts.eps2d,
         opts.radius_clip, float(opts.antialiased), ops.camera_model_index(opts.camera_model),
         *opts.weight_params, float(grad_gauss), float(grad_cams), float(ordered), lens_flags]
    return torch.tensor([v], dtype=torch.float64, device=device)


_OPTION_NAMES = ("width", "height", "sh_degree", "SH coefficients (colors.shape[1])",
                 "feature channels D", "mode", "tile_size", "precision", "near_plane",
                 "far_plane", "eps2d", "radius_clip", "antialiased", "camera_model",
                 "weight_params[0]",
                 "weight_params[1]", "weight_params[2]",
                 "gradients w.r.t. the Gaussians (grad mode and requires_grad)",
                 "gradients w.r.t. viewmats (requires_grad)", "order (given or not)",
                 "with_ut, covars and the distortion coefficients (given or not)")


def _camera_counts(opts: torch.Tensor, n_cameras: int, group) -> list[int]:
    """Every rank's camera count, gathered with its options; every rank sees every rank's
    options, so a mismatch raises the same error on all ranks (not a collective that never
    pairs up)."""
    mine = torch.cat([opts, opts.new_tensor([[n_cameras]])], 1)
    allopts = torch.cat(all_gather_rows(mine, group))  # [world, k + 1]
    for j, name in enumerate(_OPTION_NAMES):
        col = allopts[:, j].tolist()
        if any(c != col[0] for c in col):
            raise ValueError(f"distributed rasterize: {name} differs between ranks: {col}")
    return [int(c) for c in allopts[:, -1].tolist()]


def rasterize(means, quats, scales, opacities, colors, viewmats, Ks, width: int, height: int, *,
              sh_degree: int | None = None, features=None, backgrounds=None, mode: str = "sorted",
              near_plane: float = 0.01, far_plane: float = 1e10, eps2d: float = 0.3,
              antialiased: bool = False, camera_model: str = "pinhole", tile_size: int = 16,
              precision: str = "auto", radius_clip: float = 0.0,
              weight_params=DEFAULT_WEIGHT_PARAMS,
              deterministic: bool | None = None, order: torch.Tensor | None = None,
              group=None, covars=None, with_ut: bool = False, radial_coeffs=None,
              tangential_coeffs=None, thin_prism_coeffs=None) -> R.RenderOutput:
    """gsrender.rasterize over a process group: means..colors, features are this rank's shard
    of the Gaussians ([N_r, ...]; colors [N_r,3] or SH [N_r,K,3], no per-camera colours);
    viewmats [C_r,4,4], Ks [C_r,3,3], backgrounds ([C_r,3] or [3]) this rank's cameras
    (C_r >= 1). Returns this rank's images [C_r,H,W,...]. Every rank of `group` must call it
    with the same options, and, when gradients are recorded, run the backward (of a loss that
    uses its images) once per call: the backward's collectives pair up across ranks.

    The union is ordered rank by rank (rank 0's shard first), or, with order ([N_r] int64, keys
    unique over all ranks), by ascending key: the order matters where Gaussians have equal depths
    in a view (the depth sort is stable), e.g. repeated SfM points. order costs one more
    all-to-all (8 bytes a row).

    covars, with_ut and the distortion coefficients are gsrender.rasterize's (covars [N_r,3,3]
    this rank's Gaussians', the coefficients [C_r, width] this rank's cameras'); every rank
    passes the same ones (given or not) and the coefficients travel with the cameras.

    meta: "means2d", "radii", "depths", "conics", "opacities" are this rank's Gaussians projected
    into all cameras of all ranks ([C_total, N_r, ...], camera order = rank order), e.g. for
    densification statistics; "camera_offset" is the index of this rank's first camera there;
    "tile_offsets", "flatten_ids" index the gathered [C_r, M] layout that was rasterized;
    "exchange" counts the rows and bytes this rank sent and received in the forward (the
    backward sends as many back, without the int32 rows).
    """
    V, K = viewmats, Ks
    opts = R.check_options(mode=mode, precision=precision, camera_model=camera_model,
                           tile_size=tile_size, near_plane=near_plane, far_plane=far_plane,
                           eps2d=eps2d, radius_clip=radius_clip, antialiased=antialiased,
                           weight_params=weight_params, deterministic=deterministic)
    R.check_inputs(means, quats, scales, opacities, colors, V, K, width, height, sh_degree,
                   features, backgrounds, sh_channels=True, covars=covars)
    coeffs = {name: c for name, c in zip(projection.DISTORTION_ARGUMENTS,
                                          (radial_coeffs, tangential_coeffs, thin_prism_coeffs),
                                          strict=True) if c is not None}
    for name, c in coeffs.items():
        validate.tensor(c, name, (V.shape[0], None), dtype=means.dtype, device=means.device)
    lens_flags = float(sum(1 << i for i, given in enumerate(
        [bool(with_ut), covars is not None,
         *(name in coeffs for name in projection.DISTORTION_ARGUMENTS)]) if given))
    if sh_degree is None and colors.dim() == 3:
        raise ValueError("colors: per-camera colours [C,N,3] are not supported by the distributed "
                         "renderer (the cameras live on other ranks); pass [N,3] or SH")
    if features is not None and features.dim() == 3:
        raise ValueError("features: per-camera features [C,N,D] are not supported by the "
                         "distributed renderer; pass [N,D]")
    if order is not None and (order.shape != means.shape[:1] or order.dtype != torch.int64):
        raise ValueError(f"order must be an int64 tensor of shape [{means.shape[0]}], got "
                         f"{order.dtype} {list(order.shape)}")
    grad_on = torch.is_grad_enabled()
    grad_gauss = grad_on and any(t is not None and t.requires_grad
                                 for t in (means, quats, scales, opacities, colors, features,
                                           covars))
    grad_cams = grad_on and V.requires_grad
    dev = means.device
    counts = _camera_counts(_options_vector(
        width, height, sh_degree, colors, features, opts, grad_gauss, grad_cams, order is not None,
        lens_flags, dev), V.shape[0], group)

    # 1. all cameras everywhere (differentiable in viewmats: the backward sums over ranks)
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    # [C_r, 25 + the coefficients' widths]
    cams = torch.cat([V.reshape(-1, 16), K.reshape(-1, 9), *coeffs.values()], 1)
    allcams = all_gather_rows_autograd(cams, group) if grad_cams else \
        torch.cat(all_gather_rows(cams.detach(), group))
    V_all, K_all = allcams[:, :16].reshape(-1, 4, 4), allcams[:, 16:25].reshape(-1, 3, 3)
    coeffs_all = dict(zip(coeffs, allcams[:, 25:].split([c.shape[1] for c in coeffs.values()], 1),
                          strict=True))
    offsets = [sum(counts[:d]) for d in range(world)]

    # 2. project this rank's Gaussians into every camera and colour them there (the owner's work)
    radii, means2d, depths, conics, opac2d = R.project_gaussians(
        means, quats, scales, opacities, V_all, K_all, width, height, opts, covars=covars,
        with_ut=with_ut, **coeffs_all)
    chans_all = R.raster_channels(means, colors, V_all, depths, sh_degree, features)
    payload = torch.cat([means2d, conics, opac2d[..., None], chans_all], -1)  # [C_all, N, 10 + D]

    # 3. each camera's visible Gaussians to the camera's rank (rows ordered by camera = by rank)
    cam_idx, g_idx = ((radii > 0).any(-1)).nonzero(as_tuple=True)  # bin_tiles' visibility test
    owner = torch.bucketize(cam_idx, torch.tensor(offsets[1:], device=dev), right=True)
    send_counts = torch.bincount(owner, minlength=world).tolist()
    local_cam = cam_idx - torch.tensor(offsets, device=dev)[owner]
    ints = torch.cat([local_cam[:, None].to(torch.int32), radii[cam_idx, g_idx]], 1)  # [E, 3]
    recv_counts = exchange_counts(send_counts, dev, group)
    rows = all_to_all_rows_autograd(payload[cam_idx, g_idx], send_counts, recv_counts, group)
    rints = all_to_all_rows(ints, send_counts, recv_counts, group)
    if order is not None:
        keys = all_to_all_rows(order[g_idx], send_counts, recv_counts, group)

    # 4. this rank's cameras: received rows into a dense [C_r, M] layout (padding: radii 0, culled)
    C = counts[rank]
    cam = rints[:, 0].long()
    per_cam = torch.bincount(cam, minlength=C)
    M = max(int(per_cam.max()) if cam.numel() else 0, 1)
    # by camera, then by key (or by source rank: the rows arrive rank by rank)
    pre = torch.argsort(keys, stable=True) if order is not None else \
        torch.arange(cam.numel(), device=dev)
    perm = pre[torch.argsort(cam[pre], stable=True)]
    start = torch.cumsum(per_cam, 0) - per_cam
    slot = cam[perm] * M + torch.arange(cam.numel(), device=dev) - start[cam[perm]]
    dense = rows.new_zeros(C * M, rows.shape[1]).index_copy(0, slot, rows[perm]).view(C, M, -1)
    d_radii = rints.new_zeros(C * M, 2).index_copy(0, slot, rints[perm, 1:]).view(C, M, 2)
    d_m2d, d_con, d_opa = dense[..., _M2D], dense[..., _CON], dense[..., _OPA]
    d_chans, d_dep = dense[..., _CHANS], dense[..., _DEP]  # [C, M, 4 + D], [C, M]
    bg = R.background_channels(backgrounds, d_chans)
    tile_offsets, flatten_ids = R.bin_gaussians(d_m2d, d_radii, d_dep, d_con, d_opa, width,
                                                height, opts)
    render, alphas, stats, plan = R.composite(d_m2d, d_con, d_opa, d_chans, d_dep, bg,
                                              tile_offsets, flatten_ids, width, height, opts)

    fbytes = payload.element_size() * payload.shape[-1]
    ibytes = ints.element_size() * 3 + (8 if order is not None else 0)  # + the order key
    meta = {"radii": radii, "means2d": means2d, "depths": depths, "conics": conics,
            "opacities": opac2d, "camera_offset": offsets[rank], "tile_offsets": tile_offsets,
            "flatten_ids": flatten_ids, "n_intersections": flatten_ids.shape[0], "stats": stats,
            "plan": plan,
            "exchange": {"rows_sent": int(cam_idx.numel()), "rows_received": int(cam.numel()),
                         "bytes_sent": int(cam_idx.numel()) * (fbytes + ibytes),
                         "bytes_received": int(cam.numel()) * (fbytes + ibytes),
                         "row_bytes_float": fbytes, "row_bytes_int": ibytes}}
    return R.render_output(render, alphas, features is not None, meta)
