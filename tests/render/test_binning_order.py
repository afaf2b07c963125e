"""Binning's parallel pair listing, counting sort by tile and per-tile depth sort (a radix sort on
depth keys) give the lists of a plain reference: box binning lists every tile of each Gaussian's
radii box, each tile's Gaussians in Gaussian order and, sorted, stably by depth (equal depths —
−0 and +0 among them — keep Gaussian order: the distributed renderer's order keys rely on it).
The scenes have many equal depths, infinite ones, tiles longer and shorter than the radix sort's
insertion cutoff, and more Gaussians and pairs than one block / one thread's part, at 1–4 threads;
exact binning's lists (conics and opacities) do not depend on the thread count either."""
from __future__ import annotations

import pytest
import torch

from gsrender import ops
from tests.conftest import F32, F64, every_cpu_isa

W, H = 96, 80


def _scene(dtype, C=2, N=5000, seed=0):
    """Quarter-pixel means (the box arithmetic is exact in float32), integer radii 0–14 (a few
    culled), 98 % of the Gaussians in the left half (long and short tile lists), depths drawn from
    five values with ±0 and ±inf among them, and some spread ones."""
    g = torch.Generator().manual_seed(seed)
    x = torch.where(torch.rand(C, N, generator=g) < 0.98, torch.rand(C, N, generator=g) * W / 2,
                    torch.rand(C, N, generator=g) * W)
    y = torch.rand(C, N, generator=g) * H
    m2d = (torch.stack([x, y], -1) * 4).round() / 4
    radii = torch.randint(0, 15, (C, N, 2), generator=g, dtype=torch.int32)
    levels = torch.tensor([-0.0, 0.0, 2.5, float("inf"), -float("inf")], dtype=F64)
    depths = levels[torch.randint(0, 5, (C, N), generator=g)]
    spread = torch.rand(C, N, generator=g) < 0.3
    depths = torch.where(spread, torch.randn(C, N, generator=g, dtype=F64) * 3, depths)
    return m2d.to(dtype), radii, depths.to(dtype)


def _reference_lists(m2d, radii, depths, tile, sort):
    """Per tile (camera-major, row-major), the Gaussians (c·N + n) whose radii box meets it."""
    C, N = depths.shape
    r = radii.to(m2d.dtype)
    x0 = torch.ceil(m2d[..., 0] - r[..., 0] - 0.5).clamp_min(0)
    x1 = torch.floor(m2d[..., 0] + r[..., 0] - 0.5).clamp_max(W - 1)
    y0 = torch.ceil(m2d[..., 1] - r[..., 1] - 0.5).clamp_min(0)
    y1 = torch.floor(m2d[..., 1] + r[..., 1] - 0.5).clamp_max(H - 1)
    live = ((radii[..., 0] > 0) | (radii[..., 1] > 0)) & (x0 <= x1) & (y0 <= y1)
    lists = []
    for c in range(C):
        for ty in range(-(-H // tile)):
            for tx in range(-(-W // tile)):
                tx0, ty0 = tx * tile, ty * tile
                hit = live[c] & (x0[c] <= min(tx0 + tile, W) - 1) & (x1[c] >= tx0) & \
                    (y0[c] <= min(ty0 + tile, H) - 1) & (y1[c] >= ty0)
                ids = hit.nonzero().flatten()
                if sort:  # stable: equal depths (−0 == +0) keep Gaussian order
                    ids = ids[torch.sort(depths[c, ids], stable=True).indices]
                lists.append((ids + c * N).tolist())
    return lists


def _lists(offs, ids):
    ends = torch.cat([offs.flatten()[1:].long(), torch.tensor([ids.numel()])])
    return [ids[a:b].tolist() for a, b in zip(offs.flatten().long().tolist(), ends.tolist())]


def _bin(m2d, radii, depths, tile, sort, threads, extra=()):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return ops.bin_tiles(m2d, radii, depths, W, H, tile, sort, *extra)
    finally:
        torch.set_num_threads(before)


@every_cpu_isa
@pytest.mark.parametrize("tile", (16, 4, 12))  # 12: not a power of two (no shift)
@pytest.mark.parametrize("dtype", (F32, F64))
def test_box_lists_equal_the_reference_at_every_thread_count(dtype, tile):
    m2d, radii, depths = _scene(dtype)
    for sort in (True, False):
        want = _reference_lists(m2d, radii, depths, tile, sort)
        lengths = sorted(map(len, want))
        assert lengths[len(lengths) // 10] <= 32 < lengths[-1]  # both of the sort's paths
        for threads in (1, 2, 3, 4):
            got = _lists(*_bin(m2d, radii, depths, tile, sort, threads))
            assert got == want, f"sort={sort}, {threads} threads"


@every_cpu_isa
@pytest.mark.parametrize("dtype", (F32, F64))
def test_exact_lists_do_not_depend_on_the_thread_count(dtype):
    m2d, radii, depths = _scene(dtype, seed=1)
    g = torch.Generator().manual_seed(2)
    a = 0.05 + 0.5 * torch.rand(2, 5000, generator=g, dtype=F64)
    c = 0.05 + 0.5 * torch.rand(2, 5000, generator=g, dtype=F64)
    b = (torch.rand(2, 5000, generator=g, dtype=F64) * 2 - 1) * 0.9 * (a * c).sqrt()
    conics = torch.stack([a, b, c], -1).to(dtype)
    opac = torch.rand(2, 5000, generator=g, dtype=F64).to(dtype)
    one = _bin(m2d, radii, depths, 8, True, 1, (conics, opac))
    box = _bin(m2d, radii, depths, 8, True, 1)
    assert one[1].numel() < box[1].numel()  # the exact test dropped pairs
    for threads in (2, 3):
        got = _bin(m2d, radii, depths, 8, True, threads, (conics, opac))
        assert torch.equal(got[0], one[0]) and torch.equal(got[1], one[1])


def test_nan_depths_sort_after_infinity_as_on_cuda():
    """A NaN depth gets CUDA's order key (after +inf); the other Gaussians keep their order."""
    m2d = torch.tensor([[[8.0, 8.0]] * 40])
    radii = torch.full((1, 40, 2), 3, dtype=torch.int32)
    depths = torch.linspace(5.0, 1.0, 40)[None].clone()
    depths[0, 7], depths[0, 20], depths[0, 3] = float("nan"), float("inf"), 1.0
    _, ids = ops.bin_tiles(m2d, radii, depths, 16, 16, 16, True)
    finite = [i for i in torch.sort(depths[0], stable=True).indices.tolist() if i not in (7, 20)]
    assert ids.tolist() == finite + [20, 7]
