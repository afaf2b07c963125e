"""Procedural 3DGS scenes and camera rigs for tests, demos and benchmarks.

World frame (used everywhere in this module): right-handed, **+z is up**, the ground is the plane
z = 0. This matches the Mip-NeRF 360 garden points in ../shared/data (their cameras' "down" axis is
about world −z). Cameras are world-to-camera OpenCV viewmats (x right, y down, z forward) and
pinhole Ks whose principal point is the image centre (W/2, H/2), so with pixel centres at
(x+0.5, y+0.5) a point straight ahead lands in the middle of the image.

Everything is deterministic: randomness comes from a seeded CPU ``torch.Generator`` (plus NumPy's
seeded Generator for Beta draws, which torch cannot seed), and all tensors are float32 on the CPU
(object ids int64).

Scenes are surfaces covered by flat Gaussians (the shortest axis along the surface normal, like
trained 3DGS on opaque surfaces): a textured ground, walls, and labelled objects (spheres, boxes,
tori, cylinders) with ids 1..n_objects; background is id 0.
"""
from __future__ import annotations

import json
import math
import zlib
from pathlib import Path

import numpy as np
import torch

from gsrender.scene import GaussianModel, rgb_to_sh

WORLD_UP = (0.0, 0.0, 1.0)
OBJECT_KINDS = ("sphere", "box", "torus", "cylinder")
FEATURE_KINDS = ("object", "random", "smooth")

# ----------------------------------------------------------------------------------------------
# small helpers


def _generator(seed: int | None, generator: torch.Generator | None) -> torch.Generator:
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator: expected torch.Generator, got {type(generator).__name__}")
        return generator
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__}")
    return torch.Generator().manual_seed(int(seed))


def _np_rng(gen: torch.Generator) -> np.random.Generator:
    # NumPy draws (Beta) are seeded from the torch stream so one seed fixes the whole scene
    return np.random.default_rng(int(torch.randint(0, 2**62, (1,), generator=gen)))


def _vec(x, name: str, last: int = 3) -> torch.Tensor:
    t = torch.as_tensor(x, dtype=torch.float64)
    if t.ndim == 0 or t.shape[-1] != last:
        raise ValueError(f"{name}: expected shape [..., {last}], got {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name}: contains NaN or Inf")
    return t


def _pos_int(x, name: str, minimum: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{name}: expected an int, got {type(x).__name__}")
    if x < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {x}")
    return int(x)


def _pos_float(x, name: str) -> float:
    x = float(x)
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{name}: must be a positive finite number, got {x}")
    return x


def _normalize(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _split_counts(n: int, weights: list[float]) -> list[int]:
    """Integers proportional to weights summing exactly to n (largest remainder)."""
    w = np.asarray(weights, dtype=np.float64)
    if len(w) == 0:
        return []
    w = w / w.sum()
    raw = w * n
    out = np.floor(raw).astype(np.int64)
    rest = n - int(out.sum())
    order = np.argsort(-(raw - out), kind="stable")
    out[order[:rest]] += 1
    return [int(c) for c in out]


def _hsv_to_rgb(h: float, s: float, v: float) -> tuple[float, float, float]:
    i = int(h * 6.0) % 6
    f = h * 6.0 - math.floor(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    return [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]


def quat_multiply(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product of wxyz quaternions, [..., 4]."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], dim=-1)


def quat_to_rotmat(q: torch.Tensor) -> torch.Tensor:
    """[..., 4] wxyz (any norm) -> [..., 3, 3] rotation matrices."""
    w, x, y, z = _normalize(q).unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], dim=-1).reshape(q.shape[:-1] + (3, 3))


def _quats_from_normals(normals: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Unit quats whose local z axis is the normal, with a random twist about it. [N,3] -> [N,4]"""
    n = _normalize(normals)
    nx, ny, nz = n.unbind(-1)
    # shortest-arc rotation +z -> n is (1 + n_z, z × n) = (1 + n_z, -n_y, n_x, 0), normalised;
    # it is undefined only for n = -z, where a half turn about x does it
    q = torch.stack([1 + nz, -ny, nx, torch.zeros_like(nz)], dim=-1)
    flip = (1 + nz) < 1e-6
    q[flip] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=q.dtype)
    q = _normalize(q)
    half = torch.rand(n.shape[0], generator=gen, dtype=n.dtype) * math.pi  # twist/2 in [0, pi)
    zero = torch.zeros_like(half)
    twist = torch.stack([half.cos(), zero, zero, half.sin()], dim=-1)
    return _normalize(quat_multiply(q, twist))


def random_quats(n: int, gen: torch.Generator) -> torch.Tensor:
    """Uniformly random unit quaternions (normalised 4-d Gaussians), [n, 4]."""
    return _normalize(torch.randn(n, 4, generator=gen))


def _sh_from_rgb(rgb: torch.Tensor, sh_degree: int, gen: torch.Generator,
                 rest_std: float = 0.03) -> torch.Tensor:
    """[N,3] colours -> [N,K,3] SH: DC from the colour, small random higher bands (view dependence
    mild enough that the colour stays recognisable, nonzero so SH paths are exercised)."""
    k = (sh_degree + 1) ** 2
    sh = torch.zeros(rgb.shape[0], k, 3)
    sh[:, 0] = rgb_to_sh(rgb.float())
    if k > 1:
        band = torch.tensor([math.isqrt(i) for i in range(1, k)], dtype=torch.float32)  # l of coeff
        sh[:, 1:] = torch.randn(rgb.shape[0], k - 1, 3, generator=gen) * (rest_std / band)[None, :, None]
    return sh


def _check_sh_degree(sh_degree) -> int:
    if isinstance(sh_degree, bool) or not isinstance(sh_degree, (int, np.integer)):
        raise TypeError(f"sh_degree: expected an int, got {type(sh_degree).__name__}")
    if not 0 <= sh_degree <= 3:
        raise ValueError(f"sh_degree: must be in 0..3, got {sh_degree}")
    return int(sh_degree)


def _empty_model(sh_degree: int) -> GaussianModel:
    k = (sh_degree + 1) ** 2
    return GaussianModel(
        means=torch.zeros(0, 3), quats=torch.zeros(0, 4), scales=torch.zeros(0, 3),
        opacities=torch.zeros(0), sh=torch.zeros(0, k, 3), object_ids=torch.zeros(0, dtype=torch.int64),
    )


def _surface_model(points, normals, rgb, spacing, gen, sh_degree, object_id,
                   opacity_range=(0.75, 0.99), flatten=0.12, jitter=0.25) -> GaussianModel:
    """Flat Gaussians on a surface sample: tangent scales ~0.6 of the sample spacing (so neighbours
    overlap and the surface looks closed), normal scale `flatten` times smaller."""
    n = points.shape[0]
    if n == 0:
        return _empty_model(sh_degree)
    tang = 0.6 * spacing * torch.exp(torch.randn(n, 2, generator=gen) * jitter)  # [N, 2]
    thin = tang.min(dim=1).values * flatten  # [N]
    scales = torch.cat([tang, thin[:, None]], dim=1).float()
    lo, hi = opacity_range
    opac = lo + (hi - lo) * torch.rand(n, generator=gen)
    return GaussianModel(
        means=points.float(), quats=_quats_from_normals(normals.float(), gen), scales=scales,
        opacities=opac, sh=_sh_from_rgb(rgb.clamp(0, 1), sh_degree, gen),
        object_ids=torch.full((n,), int(object_id), dtype=torch.int64),
    )


# ----------------------------------------------------------------------------------------------
# cameras


def intrinsics(width: int, height: int, fov_deg: float = 60.0) -> torch.Tensor:
    """Pinhole K [3,3] with *horizontal* field of view fov_deg, square pixels (fy = fx) and the
    principal point at the image centre (W/2, H/2)."""
    width = _pos_int(width, "width")
    height = _pos_int(height, "height")
    fov = float(fov_deg)
    if not 0.0 < fov < 180.0:
        raise ValueError(f"fov_deg: must be in (0, 180), got {fov_deg}")
    f = 0.5 * width / math.tan(math.radians(fov) / 2)
    return torch.tensor([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]], dtype=torch.float32)


def look_at(eye, target, up=WORLD_UP) -> torch.Tensor:
    """World-to-camera OpenCV viewmat(s) of cameras at `eye` looking at `target`.

    eye, target: [3] or [C,3] (broadcast). up: the world up direction (+z in this module); the
    camera's y axis (image down) is the component of -up orthogonal to the view direction. When
    the view direction is parallel to `up` (looking straight down), the world axis least aligned
    with it stands in for `up`, so the result is always a proper rotation.
    Returns [4,4] for a single camera, else [C,4,4].
    """
    eye = _vec(eye, "eye")
    target = _vec(target, "target")
    up = _normalize(_vec(up, "up"))
    single = eye.ndim == 1 and target.ndim == 1
    eye, target = torch.broadcast_tensors(eye.reshape(-1, 3), target.reshape(-1, 3))
    fwd = target - eye  # [C, 3]
    dist = fwd.norm(dim=-1, keepdim=True)
    if (dist < 1e-9).any():
        raise ValueError("eye: coincides with target, the view direction is undefined")
    fwd = fwd / dist
    upc = up.reshape(-1, 3).expand_as(fwd).clone()
    right = torch.cross(fwd, upc, dim=-1)
    bad = right.norm(dim=-1) < 1e-6
    if bad.any():
        alt = torch.eye(3, dtype=fwd.dtype)[fwd[bad].abs().argmin(dim=-1)]
        right[bad] = torch.cross(fwd[bad], alt, dim=-1)
    right = _normalize(right)
    down = torch.cross(fwd, right, dim=-1)  # z × x = y: right-handed x right, y down, z forward
    rot = torch.stack([right, down, fwd], dim=-2)  # [C, 3, 3] rows = camera axes in world
    vm = torch.eye(4, dtype=torch.float64).repeat(fwd.shape[0], 1, 1)
    vm[:, :3, :3] = rot
    vm[:, :3, 3] = -(rot @ eye[..., None])[..., 0]
    vm = vm.float()
    return vm[0] if single else vm


def _rig(eyes, targets, width, height_px, fov_deg):
    vms = look_at(eyes, targets)
    if vms.ndim == 2:
        vms = vms[None]
    ks = intrinsics(width, height_px, fov_deg)[None].repeat(vms.shape[0], 1, 1)
    return vms, ks


def orbit_cameras(n: int, radius: float, height: float, target=(0.0, 0.0, 0.0), width: int = 640,
                  height_px: int = 480, fov_deg: float = 60.0, start_deg: float = 0.0):
    """n cameras evenly spaced on a horizontal circle of `radius` around `target`, `height` above
    it (world z), all looking at target. Camera i is at azimuth start_deg + 360·i/n (from +x
    towards +y). Returns (viewmats [n,4,4], Ks [n,3,3])."""
    n = _pos_int(n, "n")
    radius = _pos_float(radius, "radius")
    tgt = _vec(target, "target")
    a = torch.deg2rad(float(start_deg) + 360.0 * torch.arange(n, dtype=torch.float64) / n)
    eyes = torch.stack([radius * a.cos(), radius * a.sin(), torch.full_like(a, float(height))], -1) + tgt
    return _rig(eyes, tgt, width, height_px, fov_deg)


def hemisphere_rings(n_rings: int = 3, per_ring: int = 8, radius: float = 4.0, target=(0.0, 0.0, 0.0),
                     width: int = 640, height_px: int = 480, fov_deg: float = 60.0,
                     min_elev_deg: float = 15.0, max_elev_deg: float = 60.0):
    """Rings of cameras on the upper hemisphere of `radius` around `target`, elevations evenly
    spaced in [min_elev_deg, max_elev_deg]; odd rings are rotated by half a step so views
    interleave. Returns (viewmats [R*P,4,4], Ks [R*P,3,3]), ring-major."""
    n_rings = _pos_int(n_rings, "n_rings")
    per_ring = _pos_int(per_ring, "per_ring")
    radius = _pos_float(radius, "radius")
    if not -90.0 < min_elev_deg <= max_elev_deg < 90.0:
        raise ValueError(f"min_elev_deg/max_elev_deg: need -90 < min <= max < 90, "
                         f"got {min_elev_deg}, {max_elev_deg}")
    tgt = _vec(target, "target")
    elev = torch.linspace(min_elev_deg, max_elev_deg, n_rings, dtype=torch.float64)
    if n_rings == 1:
        elev = torch.tensor([0.5 * (min_elev_deg + max_elev_deg)], dtype=torch.float64)
    eyes = []
    for r, e in enumerate(torch.deg2rad(elev)):
        az = torch.deg2rad(360.0 * (torch.arange(per_ring, dtype=torch.float64) + 0.5 * (r % 2)) / per_ring)
        eyes.append(radius * torch.stack([e.cos() * az.cos(), e.cos() * az.sin(), e.sin().expand_as(az)], -1))
    return _rig(torch.cat(eyes) + tgt, tgt, width, height_px, fov_deg)


def forward_trajectory(n: int, start, end, width: int = 640, height_px: int = 480, fov_deg: float = 60.0,
                       look_ahead: float = 1.0, sway: float = 0.0, sway_periods: float = 1.0):
    """n cameras moving in a straight line from start to end, looking along the direction of travel
    (a driving / walking sequence). `sway` adds a sideways sinusoidal offset (world units) with
    `sway_periods` periods along the path. Returns (viewmats [n,4,4], Ks [n,3,3])."""
    n = _pos_int(n, "n")
    start = _vec(start, "start")
    end = _vec(end, "end")
    look_ahead = _pos_float(look_ahead, "look_ahead")
    d = end - start
    if d.norm() < 1e-9:
        raise ValueError("end: coincides with start, the direction of travel is undefined")
    d = d / d.norm()
    t = torch.linspace(0, 1, n, dtype=torch.float64) if n > 1 else torch.zeros(1, dtype=torch.float64)
    side = torch.cross(d, torch.tensor(WORLD_UP, dtype=torch.float64), dim=-1)
    side = side / side.norm() if side.norm() > 1e-6 else torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    off = float(sway) * torch.sin(2 * math.pi * float(sway_periods) * t)
    eyes = start + t[:, None] * (end - start) + off[:, None] * side
    return _rig(eyes, eyes + look_ahead * d, width, height_px, fov_deg)


def project_points(points, viewmats: torch.Tensor, Ks: torch.Tensor):
    """Pinhole projection of world points: returns (uv [C,N,2] pixel coordinates, depth [C,N])."""
    p = _vec(points, "points").reshape(-1, 3).float()
    vm = torch.as_tensor(viewmats, dtype=torch.float32).reshape(-1, 4, 4)
    ks = torch.as_tensor(Ks, dtype=torch.float32).reshape(-1, 3, 3)
    pc = torch.einsum("cij,nj->cni", vm[:, :3, :3], p) + vm[:, None, :3, 3]  # [C, N, 3]
    z = pc[..., 2]
    uv = torch.einsum("cij,cnj->cni", ks[:, :2, :], pc / z[..., None])  # [C, N, 2]
    return uv, z


# ----------------------------------------------------------------------------------------------
# procedural textures


def _hash2(i: torch.Tensor, j: torch.Tensor, seed: int) -> torch.Tensor:
    """Integer lattice hash -> uniform [0,1) (int64 arithmetic, masked to 32 bits: no overflow)."""
    m = 0xFFFFFFFF
    h = (i * 374761393 + j * 668265263 + int(seed) * 2246822519) & m
    h = ((h ^ (h >> 13)) * 1274126177) & m
    h = h ^ (h >> 16)
    return h.to(torch.float64) / 4294967296.0


def value_noise(uv: torch.Tensor, seed: int = 0, octaves: int = 4, frequency: float = 1.0) -> torch.Tensor:
    """Fractal value noise in [0,1] at 2-d points uv [N,2] (smoothly interpolated lattice hash)."""
    uv = torch.as_tensor(uv, dtype=torch.float64)
    out = torch.zeros(uv.shape[0], dtype=torch.float64)
    amp, total = 1.0, 0.0
    for o in range(octaves):
        p = uv * frequency * (2.0 ** o)
        ij = torch.floor(p)
        f = p - ij
        f = f * f * (3 - 2 * f)  # smoothstep: continuous first derivative across cells
        i, j = ij[:, 0].long(), ij[:, 1].long()
        s = seed * 7919 + o
        v00, v10 = _hash2(i, j, s), _hash2(i + 1, j, s)
        v01, v11 = _hash2(i, j + 1, s), _hash2(i + 1, j + 1, s)
        a = v00 + (v10 - v00) * f[:, 0]
        b = v01 + (v11 - v01) * f[:, 0]
        out += amp * (a + (b - a) * f[:, 1])
        total += amp
        amp *= 0.5
    return (out / total).float()


def checker_texture(uv: torch.Tensor, cell: float, color_a, color_b) -> torch.Tensor:
    """Two-colour checkerboard with square cells of side `cell`: uv [N,2] -> rgb [N,3]."""
    uv = torch.as_tensor(uv, dtype=torch.float64)
    par = (torch.floor(uv[:, 0] / cell) + torch.floor(uv[:, 1] / cell)).long() % 2
    ca = torch.tensor(color_a, dtype=torch.float32)
    cb = torch.tensor(color_b, dtype=torch.float32)
    return torch.where(par[:, None] == 0, ca, cb)


def _textured(uv, base_a, base_b, cell, seed, noise_amp=0.35) -> torch.Tensor:
    """Checker of two base colours modulated by fractal noise: readable texture for photometric /
    feature tests (edges from the checker, fine detail from the noise)."""
    rgb = checker_texture(uv, cell, base_a, base_b)
    nz = value_noise(uv, seed=seed, octaves=4, frequency=2.0 / cell)
    return (rgb * (1.0 - noise_amp + 2 * noise_amp * nz[:, None])).clamp(0, 1)


# ----------------------------------------------------------------------------------------------
# scene builders


def ground_plane(n: int, half_size: float = 4.0, center=(0.0, 0.0, 0.0), sh_degree: int = 0,
                 colors=((0.45, 0.38, 0.27), (0.30, 0.45, 0.25)), cell: float = 0.5,
                 seed: int = 0, generator: torch.Generator | None = None,
                 opacity_range=(0.85, 0.99)) -> GaussianModel:
    """A square horizontal ground (side 2·half_size, normal +z) with a noisy checker texture in the
    two `colors` (cells of side `cell`), object id 0."""
    n = _pos_int(n, "n", 0)
    half = _pos_float(half_size, "half_size")
    sh_degree = _check_sh_degree(sh_degree)
    gen = _generator(seed, generator)
    c = _vec(center, "center").float()
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
    n = _pos_int(n, "n", 0)
    e = _pos_float(extent, "extent")
    h = _pos_float(height, "height")
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
        d = _normalize(torch.randn(n, 3, generator=gen))
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
    n = _pos_int(n, "n", 0)
    size = _pos_float(size, "size")
    sh_degree = _check_sh_degree(sh_degree)
    c = _vec(center, "center").float()
    col = _vec(color, "color").float()
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


# ----------------------------------------------------------------------------------------------
# Mip-NeRF 360-like presets
#
# Counts and image sizes (images_4 resolution) are those typical of 3DGS trained at 30k iterations
# on Mip-NeRF 360. Statistics of trained scenes (documented choices, approximate, not fitted):
# - Opacity is U-shaped: many near-transparent Gaussians (opacity reset + pruning at 0.005 leave a
#   large mass just above it) and many near-opaque ones. Mixture of three Beta laws:
#   w_lo·Beta(0.5, 4) + w_mid·Beta(2, 2) + w_hi·Beta(4, 0.4), clipped to [0.005, 0.999].
#   Outdoor scenes (foliage, sky) have a heavier transparent mode than indoor ones.
# - Log-scales: log(surface sample spacing) + N(0, sigma²) per Gaussian (shared by its axes, so the
#   flattening along the normal is kept) + with probability p_tail an Exponential(mean tail) extra
#   (a heavy right tail: the few huge Gaussians of backgrounds and flat regions), the total factor
#   clamped to e^±3. Because the spacing shrinks as 1/sqrt(N), a preset made at scale < 1 keeps
#   roughly the same per-pixel overlap (depth complexity) as the full-size one: fewer but larger
#   Gaussians.
# - SH degree 3 (as trained).
# Layout: "outdoor" = large textured ground, sky/tree-line dome, foliage clusters, 5 objects;
# "indoor" = floor, 4 walls and a ceiling, a little clutter, 5 objects. Cameras: an orbit of 8
# views at ~60° horizontal fov looking at the objects.

_OUT = {"kind": "outdoor", "opacity_mix": (0.40, 0.20, 0.40), "log_scale_sigma": 0.6, "p_tail": 0.05,
        "tail": 0.7, "fov_deg": 60.0}
_IN = {"kind": "indoor", "opacity_mix": (0.30, 0.20, 0.50), "log_scale_sigma": 0.5, "p_tail": 0.03,
       "tail": 0.5, "fov_deg": 65.0}
PRESETS: dict[str, dict] = {
    "bicycle": {"n_gaussians": 6_100_000, "width": 1237, "height": 822, **_OUT},
    "garden": {"n_gaussians": 5_800_000, "width": 1297, "height": 840, **_OUT},
    "stump": {"n_gaussians": 4_900_000, "width": 1245, "height": 825, **_OUT},
    "flowers": {"n_gaussians": 3_600_000, "width": 1256, "height": 828, **_OUT},
    "treehill": {"n_gaussians": 3_800_000, "width": 1267, "height": 832, **_OUT},
    "room": {"n_gaussians": 1_500_000, "width": 1558, "height": 1039, **_IN},
    "counter": {"n_gaussians": 1_200_000, "width": 1558, "height": 1038, **_IN},
    "kitchen": {"n_gaussians": 1_800_000, "width": 1558, "height": 1039, **_IN},
    "bonsai": {"n_gaussians": 1_200_000, "width": 1559, "height": 1039, **_IN},
}

# default (no preset) layout: the small labelled tabletop-like scene of the demo and tests
_LAYOUTS = {
    None: {"ground_half": 4.0, "wall_sides": ("back",), "wall_extent": 4.0, "wall_height": 3.0, "dome": 0.0,
           "clutter": 0.0, "frac_ground": 0.30, "frac_walls": 0.15, "frac_objects": 0.55, "place_radius": 1.5},
    "outdoor": {"ground_half": 10.0, "wall_sides": (), "wall_extent": 0.0, "wall_height": 0.0, "dome": 30.0,
                "clutter": 0.20, "frac_ground": 0.30, "frac_walls": 0.0, "frac_objects": 0.30,
                "place_radius": 1.6},
    "indoor": {"ground_half": 4.0, "wall_sides": ("back", "front", "left", "right", "ceiling"),
               "wall_extent": 4.0, "wall_height": 3.0, "dome": 0.0, "clutter": 0.05, "frac_ground": 0.20,
               "frac_walls": 0.30, "frac_objects": 0.45, "place_radius": 1.5},
}
_DOME_FRAC = 0.20


def _object_specs(n_objects: int, place_radius: float, gen: torch.Generator) -> list[dict]:
    """Kinds, sizes, colours and positions of n non-overlapping objects resting on the ground:
    a sunflower spiral (even spread in a disk) with a random rotation, sizes below the spacing."""
    specs = []
    if n_objects == 0:
        return specs
    perm = torch.randperm(len(OBJECT_KINDS), generator=gen).tolist()
    rot = float(torch.rand(1, generator=gen)) * 2 * math.pi
    hue0 = float(torch.rand(1, generator=gen))
    max_size = min(0.8, 0.75 * place_radius * math.sqrt(math.pi / n_objects))
    golden = math.pi * (3 - math.sqrt(5))
    for k in range(n_objects):
        kind = OBJECT_KINDS[perm[k % len(OBJECT_KINDS)]]
        r = place_radius * math.sqrt((k + 0.5) / n_objects)
        a = rot + k * golden
        size = max_size * (0.7 + 0.3 * float(torch.rand(1, generator=gen)))
        z = object_half_height(kind, size)
        rgb = _hsv_to_rgb((hue0 + k / n_objects) % 1.0, 0.75, 0.9)
        yaw = float(torch.rand(1, generator=gen)) * 360.0
        specs.append({"object_id": k + 1, "kind": kind, "center": [r * math.cos(a), r * math.sin(a), z],
                      "size": size, "color": list(rgb), "yaw_deg": yaw})
    return specs


def _object_area(kind: str, size: float) -> float:
    return {"sphere": math.pi * size ** 2, "box": 6 * size ** 2,
            "torus": 4 * math.pi ** 2 * 0.35 * 0.15 * size ** 2,
            "cylinder": 2 * math.pi * 0.35 * size ** 2 + 2 * math.pi * (0.35 * size) ** 2}[kind]


def _beta_mixture(n: int, weights, params, rng: np.random.Generator) -> np.ndarray:
    comp = rng.choice(len(weights), size=n, p=np.asarray(weights) / np.sum(weights))
    out = np.empty(n)
    for i, (a, b) in enumerate(params):
        m = comp == i
        out[m] = rng.beta(a, b, size=int(m.sum()))
    return out


def _apply_trained_stats(model: GaussianModel, spec: dict, gen: torch.Generator) -> GaussianModel:
    n = model.num_gaussians
    rng = _np_rng(gen)
    op = _beta_mixture(n, spec["opacity_mix"], [(0.5, 4.0), (2.0, 2.0), (4.0, 0.4)], rng)
    model.opacities = torch.from_numpy(np.clip(op, 0.005, 0.999)).float()
    log_f = torch.randn(n, generator=gen) * spec["log_scale_sigma"]
    tail = torch.empty(n).exponential_(1.0 / spec["tail"], generator=gen)
    log_f = log_f + torch.where(torch.rand(n, generator=gen) < spec["p_tail"], tail, torch.zeros(n))
    # bounded to ×/÷ e^3 ≈ 20: 3DGS densification splits anything much larger than the scene scale
    log_f = log_f.clamp(-3.0, 3.0)
    model.scales = model.scales * log_f.exp()[:, None]
    return model


def _features(model: GaussianModel, kind: str, dim: int, n_objects: int, gen: torch.Generator) -> torch.Tensor:
    n = model.num_gaussians
    if kind == "object":
        # one random unit embedding per id (0 = background) + small iid noise (not renormalised)
        emb = _normalize(torch.randn(n_objects + 1, dim, generator=gen))
        return emb[model.object_ids] + 0.05 * torch.randn(n, dim, generator=gen)
    if kind == "random":
        return torch.randn(n, dim, generator=gen) / math.sqrt(dim)  # iid, rows of norm ≈ 1
    # smooth: random Fourier features of position (wavelengths ~2-6 world units), values in [-1, 1]
    w = torch.randn(3, dim, generator=gen) * 1.5
    b = torch.rand(dim, generator=gen) * 2 * math.pi
    return torch.sin(model.means @ w + b)


def make_scene(n_gaussians: int, n_objects: int = 5, seed: int = 0, sh_degree: int = 0, feature_dim: int = 0,
               feature_kind: str = "object", preset: str | None = None) -> GaussianModel:
    """A labelled scene of exactly n_gaussians Gaussians.

    Default layout: textured ground [-4,4]^2 at z=0, a textured back wall at y=+4, and n_objects
    shapes (cycling sphere/box/torus/cylinder) resting on the ground within 1.5 of the origin.
    object_ids: 0 = background, 1..n_objects = objects. features [N, feature_dim] when
    feature_dim > 0 ("object": per-object random unit embedding + noise 0.05; "random": iid
    N(0, 1/D); "smooth": sin of random linear functions of position). preset: a PRESETS name;
    uses its layout (outdoor/indoor) and trained-like opacity/scale statistics (see PRESETS).
    meta holds the object specs ("objects": id, kind, center, size, color, yaw_deg), "seed",
    "preset".
    """
    n_gaussians = _pos_int(n_gaussians, "n_gaussians")
    n_objects = _pos_int(n_objects, "n_objects", 0)
    if n_objects > 255:
        raise ValueError(f"n_objects: at most 255, got {n_objects}")
    sh_degree = _check_sh_degree(sh_degree)
    feature_dim = _pos_int(feature_dim, "feature_dim", 0)
    if feature_kind not in FEATURE_KINDS:
        raise ValueError(f"feature_kind: expected one of {FEATURE_KINDS}, got {feature_kind!r}")
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"preset: expected one of {sorted(PRESETS)} or None, got {preset!r}")
    spec = PRESETS[preset] if preset is not None else None
    lay = _LAYOUTS[spec["kind"] if spec else None]
    seed = _pos_int(seed, "seed", 0)
    # presets of equal size must still differ: mix a stable hash of the name into the seed
    gen = _generator(seed if preset is None else seed ^ zlib.crc32(preset.encode()), None)

    objs = _object_specs(n_objects, lay["place_radius"], gen)
    frac_obj = lay["frac_objects"] if objs else 0.0
    parts_w = [lay["frac_ground"], lay["frac_walls"], _DOME_FRAC if lay["dome"] else 0.0, lay["clutter"],
               frac_obj]
    n_ground, n_walls, n_dome, n_clutter, n_obj = _split_counts(n_gaussians, parts_w)
    obj_counts = _split_counts(n_obj, [_object_area(o["kind"], o["size"]) for o in objs])

    parts = [ground_plane(n_ground, half_size=lay["ground_half"], sh_degree=sh_degree, generator=gen)]
    if lay["wall_sides"]:
        parts.append(walls(n_walls, extent=lay["wall_extent"], height=lay["wall_height"],
                           sides=lay["wall_sides"], sh_degree=sh_degree, generator=gen))
    if lay["dome"]:
        parts.append(_dome(n_dome, lay["dome"], sh_degree, gen))
    if lay["clutter"]:
        outdoor = spec["kind"] == "outdoor"
        # rings outside the preset camera orbits (radius 4 / 2.8) so nothing blocks the views
        if outdoor:
            parts.append(_clutter(n_clutter, 40, 5.5, 9.0, 3.0, 0.6, True, sh_degree, gen))
        else:
            parts.append(_clutter(n_clutter, 12, 3.4, 3.75, 1.5, 0.15, False, sh_degree, gen))
    for o, k in zip(objs, obj_counts):
        parts.append(object_blob(o["kind"], o["center"], o["size"], o["color"], o["object_id"], k,
                                 sh_degree=sh_degree, yaw_deg=o["yaw_deg"], generator=gen))
    model = GaussianModel.cat(parts)
    if spec is not None:
        model = _apply_trained_stats(model, spec, gen)
    if feature_dim > 0:
        model.features = _features(model, feature_kind, feature_dim, n_objects, gen).float()
    model.meta = {"objects": objs, "seed": int(seed), "preset": preset, "world_up": "+z"}
    return model


def make_preset(name: str, scale: float = 1.0, seed: int = 0, sh_degree: int = 3, feature_dim: int = 0,
                feature_kind: str = "object", n_views: int = 8):
    """A Mip-NeRF 360-like scene: (GaussianModel, viewmats [V,4,4], Ks [V,3,3], width, height).

    scale multiplies the preset's Gaussian count (N = max(1, round(n_gaussians·scale))); image size
    stays the preset's. Cameras: an orbit of n_views around the objects (radius 4, 1.6 above the
    target outdoors; radius 2.8, 1.2 above indoors, inside the room)."""
    if name not in PRESETS:
        raise ValueError(f"name: expected one of {sorted(PRESETS)}, got {name!r}")
    scale = _pos_float(scale, "scale")
    spec = PRESETS[name]
    n = max(1, round(spec["n_gaussians"] * scale))
    model = make_scene(n, n_objects=5, seed=seed, sh_degree=sh_degree, feature_dim=feature_dim,
                       feature_kind=feature_kind, preset=name)
    radius, height = (4.0, 1.6) if spec["kind"] == "outdoor" else (2.8, 1.2)
    vms, ks = orbit_cameras(n_views, radius, height, target=(0.0, 0.0, 0.3), width=spec["width"],
                            height_px=spec["height"], fov_deg=spec["fov_deg"], start_deg=15.0)
    return model, vms, ks, spec["width"], spec["height"]


# ----------------------------------------------------------------------------------------------
# real geometry: the Mip-NeRF 360 garden points shipped with gsplat's tests


def garden_scene(npz_path, seed: int = 0, crop: bool = True, tiles: int = 1, sh_degree: int = 0):
    """gsplat-style test scene from test_garden.npz: (GaussianModel, viewmats [3,4,4], Ks [3,3,3],
    width, height).

    Means are the real points (optionally cropped to [-2,2]^3), colours → SH DC, and, drawn from a
    seeded torch.Generator as gsplat's tests do: random unit quats, scales uniform in
    [1e-4, 0.02], opacities uniform in (0,1) (clamped to >= 1e-4). tiles=k repeats the scene on a
    k×k grid in x/y with offsets (i − k//2)·extent, extent = the crop box (4) or the points'
    bounding box, so the copy at offset 0 stays under the real cameras (a larger scene, same
    views). sh_degree > 0 adds small random higher SH bands.
    """
    path = Path(npz_path)
    tiles = _pos_int(tiles, "tiles")
    sh_degree = _check_sh_degree(sh_degree)
    if not path.is_file():
        raise ValueError(f"npz_path: no such file {str(path)!r}")
    with np.load(path, allow_pickle=False) as d:
        missing = {"means3d", "colors", "viewmats", "Ks", "width", "height"} - set(d.files)
        if missing:
            raise ValueError(f"npz_path: {str(path)!r} lacks arrays {sorted(missing)}")
        means = torch.from_numpy(np.asarray(d["means3d"], dtype=np.float32))
        colors = torch.from_numpy(np.asarray(d["colors"], dtype=np.float32) / 255.0)
        viewmats = torch.from_numpy(np.asarray(d["viewmats"], dtype=np.float32))
        ks = torch.from_numpy(np.asarray(d["Ks"], dtype=np.float32))
        width, height = int(d["width"]), int(d["height"])
    if means.ndim != 2 or means.shape[1] != 3 or colors.shape != means.shape:
        raise ValueError(f"npz_path: means3d/colors must be [N,3] alike, got {tuple(means.shape)}, "
                         f"{tuple(colors.shape)}")
    if crop:
        keep = ((means >= -2.0) & (means <= 2.0)).all(dim=1)
        means, colors = means[keep], colors[keep]
        extent = torch.full((3,), 4.0)
    else:
        extent = means.max(0).values - means.min(0).values
    if means.shape[0] == 0:
        raise ValueError(f"npz_path: no points left in {str(path)!r} after cropping")
    if tiles > 1:
        g = torch.arange(tiles, dtype=torch.float32) - tiles // 2
        gx, gy = torch.meshgrid(g, g, indexing="ij")
        offs = torch.stack([gx, gy, torch.zeros_like(gx)], -1).reshape(-1, 3) * extent  # [k*k, 3]
        means = (means[None] + offs[:, None]).reshape(-1, 3)
        colors = colors.repeat(tiles * tiles, 1)
    gen = _generator(seed, None)
    n = means.shape[0]
    quats = random_quats(n, gen)
    scales = 1e-4 + torch.rand(n, 3, generator=gen) * (0.02 - 1e-4)
    opac = torch.rand(n, generator=gen).clamp_min(1e-4)
    model = GaussianModel(means=means.contiguous(), quats=quats, scales=scales, opacities=opac,
                          sh=_sh_from_rgb(colors, sh_degree, gen),
                          meta={"source": str(path), "seed": int(seed), "crop": bool(crop), "tiles": tiles})
    return model, viewmats, ks, width, height


# ----------------------------------------------------------------------------------------------
# simple camera JSON (data/sample/cameras.json)


def cameras_to_json(viewmats: torch.Tensor, Ks: torch.Tensor, width: int, height: int,
                    names: list[str] | None = None) -> str:
    """A JSON list of {name, width, height, K, viewmat_w2c_opencv} (the layout of
    ../shared/data/snowmiku_small/cameras_small.json frames, without image files)."""
    vms = torch.as_tensor(viewmats).reshape(-1, 4, 4).double()
    ks = torch.as_tensor(Ks).reshape(-1, 3, 3).double()
    names = names or [f"cam_{i:03d}" for i in range(vms.shape[0])]
    out = [{"name": nm, "width": int(width), "height": int(height),
            "K": [[round(v, 6) + 0.0 for v in row] for row in k.tolist()],  # + 0.0: no "-0.0" in the JSON
            "viewmat_w2c_opencv": [[round(v, 8) + 0.0 for v in row] for row in vm.tolist()]}
           for nm, k, vm in zip(names, ks, vms)]
    return json.dumps(out, indent=1)


def cameras_from_json(path) -> tuple[torch.Tensor, torch.Tensor, int, int, list[str]]:
    """Read cameras_to_json's list back: (viewmats [C,4,4], Ks [C,3,3], width, height, names).
    All cameras must share one image size."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list) or not data:
        raise ValueError(f"path: {str(path)!r} does not hold a non-empty JSON list of cameras")
    sizes = {(c.get("width"), c.get("height")) for c in data if isinstance(c, dict)}
    if len(sizes) != 1 or len(data) != sum(isinstance(c, dict) for c in data):
        raise ValueError(f"path: {str(path)!r} cameras must be objects sharing one width/height")
    width, height = sizes.pop()
    try:
        vms = torch.tensor([c["viewmat_w2c_opencv"] for c in data], dtype=torch.float32)
        ks = torch.tensor([c["K"] for c in data], dtype=torch.float32)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"path: {str(path)!r} has a malformed camera ({e})") from None
    if vms.shape[1:] != (4, 4) or ks.shape[1:] != (3, 3) or not (vms.isfinite().all() and ks.isfinite().all()):
        raise ValueError(f"path: {str(path)!r} needs finite 3x3 K and 4x4 viewmat_w2c_opencv per camera")
    names = [str(c.get("name", f"cam_{i:03d}")) for i, c in enumerate(data)]
    return vms, ks, int(width), int(height), names


def removal3d_scene(split: str, seed: int = 0, **kwargs):
    """The Removal-3D benchmark scene of VODA (gsrender.voda.removal3d.make_removal3d): layered
    objects with ground-truth object ids, cameras on hemisphere rings, RGB, instance masks and
    depth per view. split: isolated / touching / occluding / thin."""
    from gsrender.voda.removal3d import make_removal3d  # the generator builds on this module

    return make_removal3d(split, seed, **kwargs)
