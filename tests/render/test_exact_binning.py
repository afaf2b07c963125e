"""Exact binning: bin_tiles with conics and opacities lists a Gaussian only in the tiles its
α ≥ 1/255 support ellipse meets. Its lists are the radii boxes' lists filtered (same order);
every pair it drops has α < 1/255 at every pixel centre of the tile (a float64 brute force over
needle-shaped and tiny Gaussians); renders, gradients, weight_stats and contributors are the same
on both; the pipeline bins exactly; bad arguments are named."""
from __future__ import annotations

import pytest
import torch

from gsrender import ops
from gsrender import reference as ref
from tests.conftest import F32, F64, every_cpu_isa, random_scene

TILE = 8


def _projected(dtype, seed=3, C=2, W=70, H=45):
    # log-uniform scales over two decades: many needles and specks at tile corners
    s = random_scene(N=400, C=C, width=W, height=H, seed=seed, scale_range=(0.003, 0.5)).cast(dtype)
    radii, m2d, depths, conics, o2d = ops.project(s.means, s.quats, s.scales, s.opacities,
                                                  s.viewmats, s.Ks, W, H, 0.3, 0.01, 1e10, 0.0,
                                                  False)
    return {"m2d": m2d, "radii": radii, "depths": depths, "conics": conics, "o2d": o2d, "W": W,
            "H": H, "C": C, "N": s.N}


def _lists(p, exact: bool, sort: bool = True, tile: int = TILE):
    extra = (p["conics"], p["o2d"]) if exact else ()
    offs, ids = ops.bin_tiles(p["m2d"], p["radii"], p["depths"], p["W"], p["H"], tile, sort, *extra)
    ends = torch.cat([offs.flatten()[1:].long(), torch.tensor([ids.numel()])])
    return [ids[a:b].tolist() for a, b in zip(offs.flatten().long().tolist(), ends.tolist())]


def _max_alpha(p, c, g, tx, ty, tile):
    """Largest float64 α = o·exp(−σ) over the pixel centres of tile (tx, ty) inside the image."""
    ys, xs = torch.meshgrid(torch.arange(ty * tile, min((ty + 1) * tile, p["H"]), dtype=F64),
                            torch.arange(tx * tile, min((tx + 1) * tile, p["W"]), dtype=F64),
                            indexing="ij")
    m = p["m2d"][c, g].double()
    a, b, cc = p["conics"][c, g].double().tolist()
    dx, dy = m[0] - (xs + 0.5), m[1] - (ys + 0.5)
    sig = 0.5 * (a * dx * dx + cc * dy * dy) + b * dx * dy
    return float((p["o2d"][c, g].double() * torch.exp(-sig)).max())


@every_cpu_isa
@pytest.mark.parametrize("sort", (True, False))
@pytest.mark.parametrize("dtype", (F32, F64))
def test_exact_lists_drop_only_pairs_that_never_contribute(dtype, sort):
    p = _projected(dtype)
    box, exact = _lists(p, False, sort), _lists(p, True, sort)
    TW = -(-p["W"] // TILE)
    dropped = 0
    for t, (b, e) in enumerate(zip(box, exact)):
        kept = set(e)
        assert [i for i in b if i in kept] == e, f"tile {t}: not the box list filtered"
        c, tt = divmod(t, len(box) // p["C"])
        for i in b:
            if i not in kept:
                dropped += 1
                assert _max_alpha(p, c, i - c * p["N"], tt % TW, tt // TW, TILE) < ref.ALPHA_MIN
    assert dropped > 0.2 * sum(map(len, box)), (dropped, sum(map(len, box)))


def _rule_meets(p, c, g, tx, ty, tile):
    """The documented tile rule (gsrender/support_ellipse.h) in Python floats: the minimum of
    dᵀQd over tile (tx, ty)'s rectangle of pixel centres (0 with the mean inside, else the
    clamped vertex of each edge facing the mean) against 2·(ln(255·o)·(1 + 1e-4 + 1e-6·(a +
    c)²/det) + 1e-4)."""
    import math

    mx, my = (float(v) for v in p["m2d"][c, g])
    a, b, cc = (float(v) for v in p["conics"][c, g])
    level, det = math.log(ref.ALPHA_MIN_INV * float(p["o2d"][c, g])), a * cc - b * b
    if not (level > 0 and det > 0 and a > 0):
        return False
    bound = 2 * (level * (1 + 1e-4 + 1e-6 * (a + cc) ** 2 / det) + 1e-4)
    x0, y0 = tx * tile, ty * tile
    x1, y1 = min(x0 + tile, p["W"]) - 1, min(y0 + tile, p["H"]) - 1
    xs, ys = (mx - (x1 + 0.5), mx - (x0 + 0.5)), (my - (y1 + 0.5), my - (y0 + 0.5))
    in_x, in_y = xs[0] <= 0 <= xs[1], ys[0] <= 0 <= ys[1]
    if in_x and in_y:
        return True

    def edge(a, b, c, k, dy, lo, hi):  # min over dx ∈ [lo, hi] of a·dx² + 2b·dx·dy + c·dy²
        dx = min(max(k * dy, lo), hi)
        return a * dx * dx + 2 * b * dx * dy + c * dy * dy

    q = math.inf
    if not in_y:
        q = min(q, edge(a, b, cc, -b / a, ys[0] if ys[0] > 0 else ys[1], *xs))
    if not in_x:
        q = min(q, edge(cc, b, a, -b / cc, xs[0] if xs[0] > 0 else xs[1], *ys))
    return q <= bound


@every_cpu_isa
@pytest.mark.parametrize("tile", (TILE, 16))
@pytest.mark.parametrize("dtype", (F32, F64))
def test_exact_lists_are_the_rule_tile_by_tile(dtype, tile):
    """Every candidate tile of every radii box, for boxes of 1×1 up to wider than 3×3 (the
    binning's straight-line shapes and its loop), is listed exactly when the rule, evaluated
    here in float64 without fused operations, says it meets the ellipse. (The two roundings
    could only disagree within ~1e-16 of the bound: none of these scenes' tests come that
    close.)"""
    p = _projected(dtype)
    box, exact = _lists(p, False, True, tile), _lists(p, True, True, tile)
    TW = -(-p["W"] // tile)
    per_cam = len(box) // p["C"]
    for t, (b, e) in enumerate(zip(box, exact)):
        c, tt = divmod(t, per_cam)
        want = [i for i in b if _rule_meets(p, c, i - c * p["N"], tt % TW, tt // TW, tile)]
        assert want == e, f"tile {t}"
    r = p["radii"].double()
    m = p["m2d"].double()
    on = (p["radii"] > 0).any(-1)
    cols = torch.floor((m[..., 0] + r[..., 0] - 0.5).clamp(0, p["W"] - 1) / tile) - \
        torch.floor(torch.ceil(m[..., 0] - r[..., 0] - 0.5).clamp(0, p["W"] - 1) / tile)
    rows = torch.floor((m[..., 1] + r[..., 1] - 0.5).clamp(0, p["H"] - 1) / tile) - \
        torch.floor(torch.ceil(m[..., 1] - r[..., 1] - 0.5).clamp(0, p["H"] - 1) / tile)
    shapes = {(int(x) + 1, int(y) + 1) for x, y in zip(cols[on], rows[on])}
    assert {(1, 1), (2, 2), (3, 3)} <= shapes and any(x > 3 or y > 3 for x, y in shapes), shapes


def _raster(p, lists, chans, mode, leaves=None):
    offs, ids = lists
    m2d, con, o2d = leaves if leaves is not None else (p["m2d"], p["conics"], p["o2d"])
    return ops.rasterize(m2d, con, o2d, chans, p["depths"], None, offs, ids, p["W"], p["H"], TILE,
                         ops.SORTED if mode == "sorted" else ops.WEIGHTED, [0.3, 1.5, 0.05], "auto")


def _bin(p, exact: bool, sort: bool):
    extra = (p["conics"], p["o2d"]) if exact else ()
    return ops.bin_tiles(p["m2d"], p["radii"], p["depths"], p["W"], p["H"], TILE, sort, *extra)


@every_cpu_isa
@pytest.mark.parametrize("mode", ("sorted", "weighted"))
@pytest.mark.parametrize("dtype", (F32, F64))
def test_render_and_gradients_same_on_exact_lists(dtype, mode):
    p = _projected(dtype)
    chans = torch.rand(p["C"], p["N"], 6, generator=torch.Generator().manual_seed(0), dtype=dtype)
    outs = []
    for exact in (False, True):
        leaves = [t.clone().requires_grad_(True) for t in (p["m2d"], p["conics"], p["o2d"], chans)]
        out = _raster(p, _bin(p, exact, mode == "sorted"), leaves[3], mode, leaves[:3])
        loss = (out[0] * torch.linspace(0.5, 1.5, 6, dtype=dtype)).sum() + out[1].sum()
        outs.append([out[0], out[1], *torch.autograd.grad(loss, leaves)])
    # The images match bit for bit; the gradients are the same sums in another order (the
    # backward's chunks split the longer box lists elsewhere), so float32 gets a float32 sum's
    # tolerance: the conics' gradients differ by up to 1.3e-5 relative (values ~40).
    tol = dict(rtol=1e-9, atol=1e-10) if dtype == F64 else dict(rtol=1e-4, atol=1e-5)
    for got, exp in zip(*outs):
        torch.testing.assert_close(got, exp, **tol)


@pytest.mark.parametrize("dtype", (F32, F64))
def test_weight_stats_and_contributors_same_on_exact_lists(dtype):
    p = _projected(dtype, C=1)
    args = (p["m2d"], p["conics"], p["o2d"], p["depths"])
    stats = [ops.weight_stats(*args, *_bin(p, e, True), p["W"], p["H"], TILE, 0.3, 3)
             for e in (False, True)]
    for got, exp in zip(*stats):
        torch.testing.assert_close(got, exp, rtol=1e-6, atol=1e-7)
    cont = [ops.contributors(*args, *_bin(p, e, True), p["W"], p["H"], TILE, None, 16, 0.1, 0.05)
            for e in (False, True)]
    for got, exp in zip(*cont):
        torch.testing.assert_close(got, exp, rtol=1e-6, atol=1e-7)


def test_pipeline_bins_exactly():
    import gsrender

    s = random_scene(N=400, C=1, width=70, height=45, seed=3, scale_range=(0.003, 0.5))
    out = gsrender.rasterize(*s.inputs(), **s.kwargs(), tile_size=TILE)
    m = out.meta
    offs, ids = ops.bin_tiles(m["means2d"], m["radii"], m["depths"], 70, 45, TILE, True,
                              m["conics"], m["opacities"])
    assert torch.equal(m["flatten_ids"], ids) and torch.equal(m["tile_offsets"], offs)
    box = ops.bin_tiles(m["means2d"], m["radii"], m["depths"], 70, 45, TILE, True)[1]
    assert ids.numel() < box.numel()


def test_bad_exact_binning_arguments_are_named():
    p = _projected(F32, C=1)
    base = (p["m2d"], p["radii"], p["depths"], p["W"], p["H"], TILE, True)
    with pytest.raises(ValueError, match="conics and opacities must be given together"):
        ops.bin_tiles(*base, p["conics"], None)
    with pytest.raises(ValueError, match="conics"):
        ops.bin_tiles(*base, p["conics"][..., :2], p["o2d"])
    with pytest.raises(ValueError, match="opacities"):
        ops.bin_tiles(*base, p["conics"], p["o2d"][:, :5])
    with pytest.raises((ValueError, TypeError), match="opacities"):
        ops.bin_tiles(*base, p["conics"], p["o2d"].double())


@every_cpu_isa
def test_prepare_gaussians_lanes_bitwise_wherever_a_gaussian_sits():
    """float32 prepares the raster's per-Gaussian supports 8 at a time (csrc/cpu/support_lanes.h),
    the tail one by one: with k = 0 .. 8 culled Gaussians put in front of each camera's (so every
    Gaussian moves through every lane, and the last ones into and out of the tail) the images
    are the same bit for bit."""
    p = _projected(F32)
    chans = torch.rand(p["C"], p["N"], 4, generator=torch.Generator().manual_seed(1))
    ref_out = None
    for k in range(9):
        q = dict(p)
        for key, fill in (("m2d", 0.0), ("radii", 0), ("depths", 1.0), ("conics", 1.0), ("o2d", 0.0)):
            t = p[key]
            q[key] = torch.cat([torch.full((t.shape[0], k, *t.shape[2:]), fill, dtype=t.dtype), t], 1)
        q["N"] = p["N"] + k
        ch = torch.cat([torch.zeros(p["C"], k, 4), chans], 1)
        out = _raster(q, _bin(q, True, True), ch, "sorted")
        if ref_out is None:
            ref_out = out
        for got, exp in zip(out[:2], ref_out[:2]):
            assert torch.equal(got, exp), k
