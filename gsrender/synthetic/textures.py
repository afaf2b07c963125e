"""Procedural textures: lattice value noise, checkerboards and their mix, HSV colours."""
from __future__ import annotations

import math

import torch


def _hsv_to_rgb(h: float, s: float, v: float) -> tuple[float, float, float]:
    i = int(h * 6.0) % 6
    f = h * 6.0 - math.floor(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    return [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]



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

