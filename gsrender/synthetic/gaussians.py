"""Building blocks of the procedural scenes: seeded generators, flat Gaussians on surface samples,
quaternions and SH coefficients from colours (the world frame and conventions: gsrender.synthetic)."""
from __future__ import annotations

import math

import numpy as np
import torch

from gsrender.cameras import normalize
from gsrender.scene import GaussianModel, rgb_to_sh


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




def _quats_from_normals(normals: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Unit quats whose local z axis is the normal, with a random twist about it. [N,3] -> [N,4]"""
    n = normalize(normals)
    nx, ny, nz = n.unbind(-1)
    # shortest-arc rotation +z -> n is (1 + n_z, z × n) = (1 + n_z, -n_y, n_x, 0), normalised;
    # it is undefined only for n = -z, where a half turn about x does it
    q = torch.stack([1 + nz, -ny, nx, torch.zeros_like(nz)], dim=-1)
    flip = (1 + nz) < 1e-6
    q[flip] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=q.dtype)
    q = normalize(q)
    half = torch.rand(n.shape[0], generator=gen, dtype=n.dtype) * math.pi  # twist/2 in [0, pi)
    zero = torch.zeros_like(half)
    twist = torch.stack([half.cos(), zero, zero, half.sin()], dim=-1)
    return normalize(quat_multiply(q, twist))


def random_quats(n: int, gen: torch.Generator) -> torch.Tensor:
    """Uniformly random unit quaternions (normalised 4-d Gaussians), [n, 4]."""
    return normalize(torch.randn(n, 4, generator=gen))


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

