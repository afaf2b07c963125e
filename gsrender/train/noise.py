"""Counter-based random numbers keyed by Gaussian ids, so that densification draws the same noise
for a Gaussian whichever process (shard) holds it and in whatever order (N ranks train
exactly as one process with an N-times batch).

Every Gaussian carries a persistent int64 id: its index in the initial point cloud, or, for a
Gaussian born in a densification, an id hashed from its parent's id, the event (optimiser step)
and the child's number. A split child's position noise is a function of (seed, its id) only:
splitmix64 (Steele et al. 2014, the finaliser of Java's SplittableRandom) of the key gives
uniforms, Box-Muller turns them into normals. The integer hash runs on int64 tensors (wrapping
multiplication, logical shifts emulated with masks) on any device.
"""
from __future__ import annotations

import math

import torch


def _signed(c: int) -> int:
    """A 64-bit constant as the int64 that has its bits."""
    return c - (1 << 64) if c >= 1 << 63 else c


_GOLDEN = _signed(0x9E3779B97F4A7C15)
_M1 = _signed(0xBF58476D1CE4E5B9)
_M2 = _signed(0x94D049BB133111EB)


def _shr(x: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 bits (torch's >> is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def splitmix64(x: torch.Tensor) -> torch.Tensor:
    """splitmix64 of each int64 element (bits as uint64, result as int64 with the same bits)."""
    if x.dtype != torch.int64:
        raise TypeError(f"x must be int64, got {x.dtype}")
    z = x + _GOLDEN
    z = (z ^ _shr(z, 30)) * _M1
    z = (z ^ _shr(z, 27)) * _M2
    return z ^ _shr(z, 31)


def child_ids(parent_ids: torch.Tensor, event: int, child: int) -> torch.Tensor:
    """Ids of the child number `child` of each parent born at densification `event` (distinct
    children of one parent and event get distinct ids; collisions with any other id have
    probability ~2^-64 a pair)."""
    ev = splitmix64(torch.tensor([event], dtype=torch.int64, device=parent_ids.device))
    return splitmix64(splitmix64(parent_ids ^ ev) + child)


def normal(ids: torch.Tensor, seed: int, dim: int) -> torch.Tensor:
    """[M, dim] float32 standard normals, row i a function of (seed, ids[i]) only."""
    s = splitmix64(torch.tensor([seed], dtype=torch.int64, device=ids.device))
    base = splitmix64(ids ^ s)  # [M]
    pairs = (dim + 1) // 2
    k = torch.arange(2 * pairs, dtype=torch.int64, device=ids.device)
    bits = _shr(splitmix64(base[:, None] + k), 11)  # [M, 2·pairs], 53 random bits each
    u = (bits.double() + 0.5) * 2.0 ** -53  # uniform in (0, 1), never 0
    r = (-2.0 * u[:, 0::2].log()).sqrt()
    theta = 2.0 * math.pi * u[:, 1::2]
    z = torch.stack([r * theta.cos(), r * theta.sin()], -1).flatten(1)  # [M, 2·pairs]
    return z[:, :dim].float()
