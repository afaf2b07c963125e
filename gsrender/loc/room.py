"""The seeded synthetic room of the localization benchmark, built from gsrender.synthetic's
walls, ground_plane and object_blob, recoloured with a feature-rich texture (SIFT needs blobs and
corners at several scales, which the checker textures repeat too regularly to match uniquely),
plus the photometric-3DGS-like degradation of the map and the camera loops."""
from __future__ import annotations

import math
from dataclasses import replace

import torch

from gsrender import synthetic as syn
from gsrender.geometry import covariances
from gsrender.scene import GaussianModel, rgb_to_sh


def rich_texture(points: torch.Tensor, seed: int = 0, frequency: float = 5.0) -> torch.Tensor:
    """Colourful high-contrast fractal texture at 3-d points [N,3] -> rgb [N,3]: three value-noise
    channels (4 octaves from `frequency` cycles per unit), contrast-stretched by a sigmoid."""
    p = points.double()
    # a fold of 3-d to 2-d that is one-to-one on every axis-aligned plane (walls, floor, boxes)
    uv = torch.stack([p[:, 0] + 0.71 * p[:, 2] + 0.37 * p[:, 1],
                      p[:, 1] - 1.29 * p[:, 2] + 0.23 * p[:, 0]], 1)
    ch = [syn.value_noise(uv, seed=seed * 3 + i, octaves=4, frequency=frequency) for i in range(3)]
    rgb = torch.stack(ch, 1).double()
    lum = syn.value_noise(uv + 31.7, seed=seed * 3 + 7, octaves=4, frequency=frequency * 1.7)
    rgb = torch.sigmoid((rgb - 0.5) * 7.0) * (0.3 + 0.7 * torch.sigmoid((lum[:, None] - 0.5) * 7.0))
    return rgb.float().clamp(0, 1)


def make_room(n_gaussians: int = 120_000, extent: float = 1.6, height: float = 2.2, seed: int = 0,
              randomize: bool = False) -> GaussianModel:
    """Four walls and a floor of a room [-extent, extent]² × [0, height] with objects against the
    walls, all textured with rich_texture; sh degree 0. Fixed layout (two boxes, two spheres in
    the corners) unless randomize: then the seed also draws the extent (1.5–2.0), the height
    (2.0–2.6) and 2–5 boxes or spheres of random size (0.3–0.6) and yaw at random places against
    the walls (over 1.15 from the centre, so the cameras' band stays free)."""
    gen = torch.Generator().manual_seed(seed)
    if randomize:
        u = lambda a, b: a + (b - a) * float(torch.rand(1, generator=gen))
        extent, height = u(1.5, 2.0), u(2.0, 2.6)
        specs = []
        for _ in range(int(torch.randint(2, 6, (1,), generator=gen))):
            size = u(0.3, 0.6)
            ang = u(0.0, 2 * math.pi)
            # against a wall: Chebyshev distance extent − size/2 from the centre (≥ 1.18)
            r = (extent - size / 2 - 0.02) / max(abs(math.cos(ang)), abs(math.sin(ang)))
            kind = ("box", "sphere")[int(torch.randint(0, 2, (1,), generator=gen))]
            specs.append((kind, (r * math.cos(ang), r * math.sin(ang), size / 2), size, u(0, 90)))
    else:
        e = 0.75 * extent
        specs = [(kind, c, size, 30.0 * i) for i, (kind, c, size) in enumerate(
            [("box", (e, e, 0.25), 0.5), ("sphere", (-e, e, 0.3), 0.6), ("box", (-e, -e, 0.2), 0.4),
             ("sphere", (e, -e, 0.25), 0.5)])]
    wall_area, floor_area = 4 * 2 * extent * height, (2 * extent) ** 2
    n_obj = n_gaussians // 10
    n_surf = n_gaussians - n_obj
    n_walls = int(n_surf * wall_area / (wall_area + floor_area))
    parts = [syn.walls(n_walls, extent=extent, height=height,
                       sides=("back", "front", "left", "right"), generator=gen),
             syn.ground_plane(n_surf - n_walls, half_size=extent, generator=gen)]
    for i, (kind, c, size, yaw) in enumerate(specs):
        parts.append(syn.object_blob(kind, c, size, (0.5, 0.5, 0.5), i + 1, n_obj // len(specs),
                                     yaw_deg=yaw, generator=gen))
    room = GaussianModel.cat(parts)
    rgb = rich_texture(room.means, seed=seed)
    return replace(room, sh=rgb_to_sh(rgb)[:, None, :])


# A photometric 3DGS fits texture with Gaussians of many sizes, few of them as fine as the
# surfels: merging at three cell sizes (12, 6 and 3 cm: about 37, 18 and 9 px wide at 1.5 m in
# the 640×480 views), half of what is left at each, leaves 1/8 of the surface as fine surfels and
# the rest as Gaussians several to tens of pixels wide: the many-to-one case splitting targets.
DEFAULT_MERGE_CELLS = (0.12, 0.06, 0.03)
DEFAULT_MERGE_SHARE = 0.5
# Which cells merge: densification leaves large Gaussians where the texture is flat. A cell's
# merge score is texture_corr·z(flatness) + √(1 − texture_corr²)·noise (a Gaussian copula on the
# normal score of minus its members' luminance spread); the top merge_share of cells merge.
# 1 = strictly the flattest cells, 0 = random cells (the earlier grid degradation).
# Measured (studies/loc/footprint_texture.py, tuning rooms 0-1 only): the rank correlation of
# footprint size with the gradient of the model's own rendering is -0.30 on plant.splat and
# -0.34 to -0.37 on the degraded rooms for every texture_corr in [0, 1] (a large Gaussian renders
# flat whatever was under it), so that statistic does not pin texture_corr; against the
# ground-truth texture (which plant.splat lacks) it goes from -0.12 (0) to -0.27 (1). 0.8 is a
# prior (densification leaves large Gaussians mostly, not only, where texture is flat).
DEFAULT_TEXTURE_CORR = 0.8


def degrade(model: GaussianModel, *, merge_share: float = DEFAULT_MERGE_SHARE,
            merge_cells: float | tuple[float, ...] = DEFAULT_MERGE_CELLS,
            texture_corr: float | None = DEFAULT_TEXTURE_CORR, floater_share: float = 0.05,
            jitter: float = 0.003, seed: int = 0) -> GaussianModel:
    """A map like a photometric 3DGS: at each cell size of merge_cells (largest first), the share
    merge_share of the not yet merged cells (chosen by texture_corr, see above; None = random)
    is merged into one large Gaussian per cell (moment-matched mean and covariance, mean colour,
    max opacity); then low-opacity floaters (floater_share of N) in the room's volume, and
    Gaussian position jitter of std `jitter`."""
    if not 0 <= merge_share <= 1:
        raise ValueError(f"merge_share must be in [0, 1], got {merge_share}")
    if texture_corr is not None and not 0 <= texture_corr <= 1:
        raise ValueError(f"texture_corr must be in [0, 1] or None, got {texture_corr}")
    gen = torch.Generator().manual_seed(seed)
    N = model.num_gaussians
    cells = (merge_cells,) if isinstance(merge_cells, (int, float)) else tuple(merge_cells)
    merged, rest = [], model
    for cell in sorted(cells, reverse=True):
        m = _merge_cells(rest, cell, merge_share, texture_corr, gen)
        if m is not None:
            merged.append(m[0])
            rest = m[1]
    n_f = int(floater_share * N)
    lo, hi = model.means.min(0).values, model.means.max(0).values
    floaters = GaussianModel(
        means=lo + (hi - lo) * torch.rand(n_f, 3, generator=gen),
        quats=syn.random_quats(n_f, gen), scales=0.01 + 0.04 * torch.rand(n_f, 3, generator=gen),
        opacities=0.05 + 0.25 * torch.rand(n_f, generator=gen),
        sh=rgb_to_sh(torch.rand(n_f, 3, generator=gen))[:, None, :],
        object_ids=torch.zeros(n_f, dtype=torch.int64))
    out = GaussianModel.cat([rest, *merged, floaters])
    return replace(out, means=out.means + jitter * torch.randn(out.means.shape, generator=gen))


def _merged_cells(model: GaussianModel, inv: torch.Tensor, share: float,
                  texture_corr: float | None, gen: torch.Generator) -> torch.Tensor:
    """Which of the cells (inv [N]: each Gaussian's cell) merge -> bool [G]."""
    G = int(inv.max()) + 1
    noise = torch.randn(G, generator=gen, dtype=torch.float64)
    if texture_corr is None:
        return torch.rand(G, generator=gen) < share
    lum = (model.sh[:, 0].double() * 0.28209479177387814 + 0.5).mean(1)  # [N] base luminance
    one = torch.ones_like(lum)
    cnt = torch.zeros(G, dtype=torch.float64).index_add_(0, inv, one)
    mean = torch.zeros(G, dtype=torch.float64).index_add_(0, inv, lum) / cnt
    var = torch.zeros(G, dtype=torch.float64).index_add_(0, inv, (lum - mean[inv]) ** 2) / cnt
    # normal scores of flatness (−spread); cells with < 3 members have no spread estimate: 0
    rank = torch.argsort(torch.argsort(-var)).double()
    z = torch.special.ndtri((rank + 0.5) / G)
    z = torch.where(cnt >= 3, z, torch.zeros_like(z))
    score = texture_corr * z + math.sqrt(1 - texture_corr ** 2) * noise
    n_merge = int(round(share * G))
    merged = torch.zeros(G, dtype=torch.bool)
    merged[torch.argsort(score, descending=True)[:n_merge]] = True
    return merged


def _merge_cells(model: GaussianModel, cell: float, share: float, texture_corr: float | None,
                 gen: torch.Generator) -> tuple[GaussianModel, GaussianModel] | None:
    """Merges the Gaussians of a share of the grid cells of side `cell` into one moment-matched
    Gaussian per cell. -> (merged, the untouched rest), or None if none merged."""
    cells = torch.floor(model.means.double() / cell).long()
    _, inv = torch.unique(cells, dim=0, return_inverse=True)
    merged_cell = _merged_cells(model, inv, share, texture_corr, gen)
    m = merged_cell[inv]  # [N] Gaussians that get merged
    idx = m.nonzero().squeeze(1)
    if idx.numel() == 0:
        return None
    cid = torch.unique(inv[idx], return_inverse=True)[1]
    G = int(cid.max()) + 1
    # moment matching per merged cell: mean, covariance (own covariance + spread), colour
    mu = model.means[idx].double()
    cov = covariances(model.quats[idx].double(), model.scales[idx].double())
    cnt = torch.zeros(G, dtype=torch.float64).index_add_(0, cid, torch.ones_like(cid, dtype=torch.float64))
    mean = torch.zeros(G, 3, dtype=torch.float64).index_add_(0, cid, mu) / cnt[:, None]
    d = mu - mean[cid]
    second = cov + d[:, :, None] * d[:, None, :]
    C = torch.zeros(G, 3, 3, dtype=torch.float64).index_add_(0, cid, second) / cnt[:, None, None]
    evals, evecs = torch.linalg.eigh(C + 1e-10 * torch.eye(3, dtype=torch.float64))
    evecs = evecs * torch.linalg.det(evecs).sign()[:, None, None]  # proper rotations
    scales = evals.clamp_min(1e-8).sqrt()
    sh = torch.zeros(G, *model.sh.shape[1:], dtype=model.sh.dtype).index_add_(
        0, cid, model.sh[idx]) / cnt[:, None, None].to(model.sh.dtype)
    op = torch.zeros(G).scatter_reduce_(0, cid, model.opacities[idx].float(), reduce="amax",
                                        include_self=False)
    return (GaussianModel(means=mean.float(), quats=_rotmat_to_quat(evecs).float(),
                          scales=scales.float(), opacities=op, sh=sh,
                          object_ids=torch.zeros(G, dtype=torch.int64)),
            model.subset(~m))


def _rotmat_to_quat(R: torch.Tensor) -> torch.Tensor:
    """wxyz quaternions [N,4] of proper rotations [N,3,3] (Shepperd's method via the largest of
    the four squared components)."""
    tr = R[:, 0, 0] + R[:, 1, 1] + R[:, 2, 2]
    q2 = torch.stack([1 + tr, 1 + 2 * R[:, 0, 0] - tr, 1 + 2 * R[:, 1, 1] - tr,
                      1 + 2 * R[:, 2, 2] - tr], 1).clamp_min(0)  # 4·(w², x², y², z²)
    k = q2.argmax(1)
    s = torch.sqrt(q2.gather(1, k[:, None]))[:, 0]  # 2·|q_k|
    w = torch.stack([s * s, R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]], 1)
    x = torch.stack([R[:, 2, 1] - R[:, 1, 2], s * s, R[:, 0, 1] + R[:, 1, 0], R[:, 0, 2] + R[:, 2, 0]], 1)
    y = torch.stack([R[:, 0, 2] - R[:, 2, 0], R[:, 0, 1] + R[:, 1, 0], s * s, R[:, 1, 2] + R[:, 2, 1]], 1)
    z = torch.stack([R[:, 1, 0] - R[:, 0, 1], R[:, 0, 2] + R[:, 2, 0], R[:, 1, 2] + R[:, 2, 1], s * s], 1)
    q = torch.stack([w, x, y, z], 1)[torch.arange(R.shape[0]), k]  # rows: 4·q_k·q
    return torch.nn.functional.normalize(q, dim=1)


def loop_cameras(n: int, radius: float = 0.6, height: float = 1.3, look_dist: float = 2.0,
                 yaw_offset_deg: float = 0.0, pitch: float = -0.25, width: int = 640,
                 height_px: int = 480, fov_deg: float = 70.0):
    """n cameras on a loop of `radius` around the room's vertical axis at `height`, looking
    outward (towards the walls) and slightly down. Returns (viewmats [n,4,4], Ks [n,3,3])."""
    a = torch.deg2rad(yaw_offset_deg + 360.0 * torch.arange(n, dtype=torch.float64) / n)
    eye = torch.stack([radius * a.cos(), radius * a.sin(), torch.full_like(a, height)], 1)
    d = torch.stack([a.cos(), a.sin(), torch.full_like(a, pitch)], 1)
    vms = syn.look_at(eye, eye + look_dist * d)
    Ks = syn.intrinsics(width, height_px, fov_deg)[None].repeat(n, 1, 1)
    return vms, Ks


def perturb_cameras(viewmats: torch.Tensor, gen: torch.Generator, trans: float = 0.1,
                    rot_deg: float = 5.0) -> torch.Tensor:
    """Random rigid perturbations of camera poses (position ±trans, rotation up to rot_deg)."""
    n = viewmats.shape[0]
    axis = torch.nn.functional.normalize(torch.randn(n, 3, generator=gen, dtype=torch.float64), dim=1)
    ang = math.radians(rot_deg) * (2 * torch.rand(n, generator=gen, dtype=torch.float64) - 1)
    Kx = torch.zeros(n, 3, 3, dtype=torch.float64)
    Kx[:, 0, 1], Kx[:, 0, 2], Kx[:, 1, 2] = -axis[:, 2], axis[:, 1], -axis[:, 0]
    Kx = Kx - Kx.transpose(1, 2)
    dR = torch.linalg.matrix_exp(Kx * ang[:, None, None])
    out = viewmats.double().clone()
    R, t = out[:, :3, :3], out[:, :3, 3]
    centre = -(R.transpose(1, 2) @ t[..., None])[..., 0] + trans * (
        2 * torch.rand(n, 3, generator=gen, dtype=torch.float64) - 1)
    Rn = dR @ R
    out[:, :3, :3] = Rn
    out[:, :3, 3] = -(Rn @ centre[..., None])[..., 0]
    return out.float()


# Query placement relative to the benchmark's two training loops (radius 0.5 m at 1.1 m and 0.7 m
# at 1.5 m): "near" = a training camera moved ≤ 3 cm; "between" = the loop halfway (0.6 m at
# 1.3 m, ~0.22 m from both); "beyond" = outside the band (0.25 m at 0.8 m, ~0.38 m from the inner
# loop). Every query then gets a random ±3 cm / 3° perturbation.
QUERY_PLACES = {"near": None, "between": (0.6, 1.3), "beyond": (0.25, 0.8)}


def query_cameras(place: str, n: int, train_viewmats: torch.Tensor, gen: torch.Generator,
                  width: int = 640, height_px: int = 480, fov_deg: float = 70.0):
    """n query cameras at `place` (a key of QUERY_PLACES) -> (viewmats [n,4,4], Ks [n,3,3])."""
    if place not in QUERY_PLACES:
        raise ValueError(f"place must be one of {tuple(QUERY_PLACES)}, got {place!r}")
    if QUERY_PLACES[place] is None:
        vms = train_viewmats[torch.randint(0, train_viewmats.shape[0], (n,), generator=gen)]
    else:
        r, h = QUERY_PLACES[place]
        yaws = 360.0 * torch.rand(n, generator=gen, dtype=torch.float64)
        vms = torch.cat([loop_cameras(1, radius=r, height=h, yaw_offset_deg=float(y))[0]
                         for y in yaws])
    Ks = syn.intrinsics(width, height_px, fov_deg)[None].repeat(n, 1, 1)
    return perturb_cameras(vms, gen, trans=0.03, rot_deg=3.0), Ks
