"""Surfaces covered by flat Gaussians: the ground, room walls, labelled objects (sphere, box,
torus, cylinder), a sky dome and volumetric clutter."""
from __future__ import annotations

import math

import torch

from gsrender.cameras import check_int, check_positive, check_vec, normalize
from gsrender.scene import GaussianModel
from gsrender.synthetic.gaussians import (
    _check_sh_degree,
    _empty_model,
    _generator,
    _sh_from_rgb,
    _split_counts,
    _surface_model,
    random_quats,
)
from gsrender.synthetic.textures import _textured, value_noise

OBJECT_KINDS = ("sphere", "box", "torus", "cylinder")


def ground_plane(n: int, half_size: float = 4.0, center=(0.0, 0.0, 0.0), sh_degree: int = 0,
                 colors=((0.45, 0.38, 0.27), (0.30, 0.45, 0.25)), cell: float = 0.5,
                 seed: int = 0, generator: torch.Generator | None = None,
                 opacity_range=(0.85, 0.99)) -> GaussianModel:
    """A square horizontal ground (side 2·half_size, normal +z) with a noisy checker texture in the
    two `colors` (cells of side `cell`), object id 0."""
    n = check_int(n, "n", 0)
    half = check_positive(half_size, "half_size")
    sh_degree = _check_sh_degree(sh_degree)
    gen = _generator(seed, generator)
    c = check_vec(center, "center").float()
    xy = (torch.rand(n, 2, generator=gen) * 2 - 1) * half
    pts = torch.cat([xy, torch.zeros(n, 1)], dim=1) + c
    nrm = torch.tensor([0.0, 0.0, 1.0]).expand(n, 3)
    rgb = _textured(pts[:, :2], colors[0], colors[1], cell, seed=11)
    spacing = math.sqrt((2 * half) ** 2 / max(n, 1))
    return _surface_model(pts, nrm, rgb, spacing, gen, sh_degree, 0, opacity_range=opacity_range)


_WALL_SIDES = ("back", "front", "left", "right", "ceiling")


def walls(n: int, extent: float = 4.0, height: float = 3.0, sides=("back",), sh_degree: int = 0,
          colors=((0.80, 0.78, 0.72), (0.62, 0.60, 0.66)), cell: float = 0.6, seed: int = 0,
          generator: torch.Generator | None = None, opacity_range=(0.85, 0.99)) -> GaussianModel:
    """Vertical walls of a room [-extent, extent]^2 × [0, height], normals facing the inside, with a
    noisy checker texture; object id 0. sides ⊆ {"back" (y=+extent), "front" (y=−extent),
    "left" (x=−extent), "right" (x=+extent), "ceiling" (z=height)}. Gaussians are split in
    proportion to area."""
    n = check_int(n, "n", 0)
    e = check_positive(extent, "extent")
    h = check_positive(height, "height")
    sh_degree = _check_sh_degree(sh_degree)
    sides = tuple(sides)
    if not sides or any(s not in _WALL_SIDES for s in sides):
        raise ValueError(f"sides: expected a non-empty subset of {_WALL_SIDES}, got {sides}")
    gen = _generator(seed, generator)
    areas = [(2 * e) ** 2 if s == "ceiling" else 2 * e * h for s in sides]
    counts = _split_counts(n, areas)
    pts_l, nrm_l, uv_l = [], [], []
    for side, k in zip(sides, counts):
        u = (torch.rand(k, generator=gen) * 2 - 1) * e  # along the wall
        if side == "ceiling":
            v = (torch.rand(k, generator=gen) * 2 - 1) * e
            p = torch.stack([u, v, torch.full_like(u, h)], 1)
            nr = [0.0, 0.0, -1.0]
            uv = torch.stack([u, v], 1)
        else:
            z = torch.rand(k, generator=gen) * h
            full = torch.full_like(u, e)
            p, nr = {
                "back": (torch.stack([u, full, z], 1), [0.0, -1.0, 0.0]),
                "front": (torch.stack([u, -full, z], 1), [0.0, 1.0, 0.0]),
                "left": (torch.stack([-full, u, z], 1), [1.0, 0.0, 0.0]),
                "right": (torch.stack([full, u, z], 1), [-1.0, 0.0, 0.0]),
            }[side]
            uv = torch.stack([u, z], 1)
        pts_l.append(p)
        nrm_l.append(torch.tensor(nr).expand(k, 3))
        uv_l.append(uv + 17.0 * len(uv_l))  # different texture patch per wall
    pts, nrm, uv = torch.cat(pts_l), torch.cat(nrm_l), torch.cat(uv_l)
    rgb = _textured(uv, colors[0], colors[1], cell, seed=23, noise_amp=0.25)
    spacing = math.sqrt(sum(areas) / max(n, 1))
    return _surface_model(pts, nrm, rgb, spacing, gen, sh_degree, 0, opacity_range=opacity_range)


def _sample_object_surface(kind: str, n: int, size: float, gen: torch.Generator):
    """Points, outward normals and total area of a shape centred at the origin (axis along +z)."""
    if kind == "sphere":
        r = size / 2
        d = normalize(torch.randn(n, 3, generator=gen))
        return d * r, d, 4 * math.pi * r * r
    if kind == "box":
        h = size / 2
        face = torch.randint(0, 6, (n,), generator=gen)  # 6 faces of equal area
        uv = (torch.rand(n, 2, generator=gen) * 2 - 1) * h
        axis = face // 2
        sign = (face % 2).float() * 2 - 1
        pts = torch.zeros(n, 3)
        nrm = torch.zeros(n, 3)
        ar = torch.arange(n)
        pts[ar, axis] = sign * h
        nrm[ar, axis] = sign
        pts[ar, (axis + 1) % 3] = uv[:, 0]
        pts[ar, (axis + 2) % 3] = uv[:, 1]
        return pts, nrm, 6 * size * size
    if kind == "torus":
        # lying flat; outer diameter = size; uniform area density by rejection on the
        # area element (R + r cos v) / (R + r)
        big, small = 0.35 * size, 0.15 * size
        us, vs, got = [torch.zeros(0)], [torch.zeros(0)], 0
        while got < n:
            m = max(64, int((n - got) * 1.6))
            u = torch.rand(m, generator=gen) * 2 * math.pi
            v = torch.rand(m, generator=gen) * 2 * math.pi
            keep = torch.rand(m, generator=gen) * (big + small) < big + small * v.cos()
            us.append(u[keep])
            vs.append(v[keep])
            got += int(keep.sum())
        u, v = torch.cat(us)[:n], torch.cat(vs)[:n]
        nrm = torch.stack([v.cos() * u.cos(), v.cos() * u.sin(), v.sin()], 1)
        ring = torch.stack([u.cos(), u.sin(), torch.zeros_like(u)], 1)
        return ring * big + nrm * small, nrm, 4 * math.pi ** 2 * big * small
    if kind == "cylinder":
        # upright; height = size, diameter = 0.7·size; side and caps by area
        r, hh = 0.35 * size, size / 2
        side_a, cap_a = 2 * math.pi * r * size, math.pi * r * r
        part = torch.multinomial(torch.tensor([side_a, cap_a, cap_a]), n, replacement=True, generator=gen) \
            if n > 0 else torch.zeros(0, dtype=torch.int64)
        th = torch.rand(n, generator=gen) * 2 * math.pi
        t = torch.rand(n, generator=gen)
        rad = torch.where(part == 0, torch.full_like(t, r), r * t.sqrt())  # uniform on the disks
        zz = torch.where(part == 0, (t * 2 - 1) * hh, torch.where(part == 1, hh, -hh))
        pts = torch.stack([rad * th.cos(), rad * th.sin(), zz], 1)
        nrm = torch.where((part == 0)[:, None], torch.stack([th.cos(), th.sin(), torch.zeros_like(th)], 1),
                          torch.stack([torch.zeros_like(th), torch.zeros_like(th),
                                       torch.where(part == 1, 1.0, -1.0)], 1))
        return pts, nrm, side_a + 2 * cap_a
    raise ValueError(f"kind: expected one of {OBJECT_KINDS}, got {kind!r}")


def object_half_height(kind: str, size: float) -> float:
    """Half the vertical extent of object_blob(kind, size=size): put its centre this high to rest
    it on the ground."""
    return {"sphere": size / 2, "box": size / 2, "torus": 0.15 * size, "cylinder": size / 2}[kind]


def object_blob(kind: str, center, size: float, color, object_id: int, n: int, sh_degree: int = 0,
                yaw_deg: float = 0.0, seed: int = 0, generator: torch.Generator | None = None,
                opacity_range=(0.8, 0.99)) -> GaussianModel:
    """Flat Gaussians sampled uniformly (by area) on the surface of a shape, labelled object_id.

    kind: "sphere" (diameter = size), "box" (cube of side size), "torus" (lying flat, outer
    diameter size, tube diameter 0.3·size) or "cylinder" (upright, height size, diameter 0.7·size),
    rotated by yaw_deg about +z and centred at `center`. Colours: `color` (rgb in [0,1]) shaded by
    a little fractal noise so the surface has texture.
    """
    if kind not in OBJECT_KINDS:
        raise ValueError(f"kind: expected one of {OBJECT_KINDS}, got {kind!r}")
    n = check_int(n, "n", 0)
    size = check_positive(size, "size")
    sh_degree = _check_sh_degree(sh_degree)
    c = check_vec(center, "center").float()
    col = check_vec(color, "color").float()
    if ((col < 0) | (col > 1)).any():
        raise ValueError(f"color: components must be in [0, 1], got {col.tolist()}")
    gen = _generator(seed, generator)
    pts, nrm, area = _sample_object_surface(kind, n, size, gen)
    yaw = math.radians(float(yaw_deg))
    rz = torch.tensor([[math.cos(yaw), -math.sin(yaw), 0.0], [math.sin(yaw), math.cos(yaw), 0.0],
                       [0.0, 0.0, 1.0]])
    pts, nrm = pts @ rz.T, nrm @ rz.T
    # texture coordinates: a 3-d point folded to 2-d (enough for visible, object-fixed detail)
    uv = torch.stack([pts[:, 0] + 0.7 * pts[:, 2], pts[:, 1] - 1.3 * pts[:, 2]], 1) / size
    shade = 0.75 + 0.35 * value_noise(uv, seed=int(object_id) + 101, octaves=3, frequency=3.0)
    rgb = col[None] * shade[:, None]
    spacing = math.sqrt(area / max(n, 1))
    return _surface_model(pts + c, nrm, rgb, spacing, gen, sh_degree, object_id, opacity_range=opacity_range)


def _dome(n: int, radius: float, sh_degree: int, gen: torch.Generator) -> GaussianModel:
    """Upper hemisphere (plus a 10° skirt) seen from inside: sky gradient with a dark noisy 'tree
    line' near the horizon; stands in for the far background of unbounded 360° captures."""
    z = torch.rand(n, generator=gen) * 1.1736 - 0.1736  # sin(elev) uniform: uniform area, elev > -10°
    az = torch.rand(n, generator=gen) * 2 * math.pi
    rxy = (1 - z * z).clamp_min(0).sqrt()
    d = torch.stack([rxy * az.cos(), rxy * az.sin(), z], 1)
    sky = torch.tensor([0.55, 0.70, 0.92]) + (torch.tensor([0.85, 0.88, 0.95]) - torch.tensor(
        [0.55, 0.70, 0.92])) * (1 - z.clamp(0, 1))[:, None]
    nz = value_noise(torch.stack([az * 6, z * 20], 1), seed=5, octaves=4)
    tree_h = 0.10 + 0.15 * nz  # tree line height in sin(elev)
    trees = torch.tensor([0.18, 0.28, 0.14]) * (0.6 + 0.8 * nz[:, None])
    rgb = torch.where((z < tree_h)[:, None], trees, sky)
    spacing = math.sqrt(2 * math.pi * 1.17 * radius ** 2 / max(n, 1))
    return _surface_model(d * radius, -d, rgb, spacing, gen, sh_degree, 0, opacity_range=(0.9, 0.99),
                          flatten=0.3)


def _clutter(n: int, n_clusters: int, r_min: float, r_max: float, z_max: float, spread_max: float,
             outdoor: bool, sh_degree: int, gen: torch.Generator) -> GaussianModel:
    """Volumetric clusters of small, semi-transparent Gaussians (bushes, foliage, clutter): the
    non-surface part of trained scenes."""
    if n == 0:
        return _empty_model(sh_degree)
    ang = torch.rand(n_clusters, generator=gen) * 2 * math.pi
    rad = r_min + (r_max - r_min) * torch.rand(n_clusters, generator=gen).sqrt()
    spread = spread_max * (0.3 + 0.7 * torch.rand(n_clusters, 3, generator=gen))  # [K, 3] per-axis std
    cz = spread[:, 2] + torch.rand(n_clusters, generator=gen) * z_max * 0.5
    centres = torch.stack([rad * ang.cos(), rad * ang.sin(), cz], 1)
    which = torch.randint(0, n_clusters, (n,), generator=gen)
    pts = centres[which] + torch.randn(n, 3, generator=gen) * spread[which]
    pts[:, 2] = pts[:, 2].clamp_min(0.01)
    base = torch.tensor([0.22, 0.40, 0.15]) if outdoor else torch.tensor([0.55, 0.45, 0.35])
    hue = torch.rand(n_clusters, 3, generator=gen) * 0.25 - 0.125
    rgb = (base + hue[which]) * (0.7 + 0.6 * torch.rand(n, 1, generator=gen))
    vol = float((4 / 3 * math.pi * spread.prod(1)).sum())
    spacing = (vol / n) ** (1 / 3)
    scales = (0.5 * spacing * torch.exp(torch.randn(n, 3, generator=gen) * 0.4)).float()
    return GaussianModel(
        means=pts.float(), quats=random_quats(n, gen), scales=scales,
        opacities=0.1 + 0.6 * torch.rand(n, generator=gen), sh=_sh_from_rgb(rgb.clamp(0, 1), sh_degree, gen),
        object_ids=torch.zeros(n, dtype=torch.int64),
    )

