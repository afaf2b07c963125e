"""The weight_stats op (SplitGS-Loc): per-Gaussian Σw, max w, dominance view counts and per-pixel
top-K contributors against the dense float64 reference's blend weights; opcheck; bad input."""
from __future__ import annotations

import pytest
import torch

from gsrender import ops
from gsrender import reference as ref
from tests.conftest import every_cpu_isa

F32, F64 = torch.float32, torch.float64
W, H, TILE = 29, 21, 8


def _projected(dtype, N=40, C=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(N, 3, generator=g, dtype=F64) * torch.tensor([0.8, 0.6, 0.3], dtype=F64)
    means[:, 2] += 4.0
    quats = torch.randn(N, 4, generator=g, dtype=F64)
    scales = 0.05 + 0.25 * torch.rand(N, 3, generator=g, dtype=F64)
    opac = 0.3 + 0.69 * torch.rand(N, generator=g, dtype=F64)
    vm = torch.eye(4, dtype=F64).repeat(C, 1, 1)
    vm[:, :3, 3] = 0.2 * torch.randn(C, 3, generator=g, dtype=F64)
    Ks = torch.tensor([[25.0, 0, W / 2], [0, 24.0, H / 2], [0, 0, 1]], dtype=F64).repeat(C, 1, 1)
    ins = [t.to(dtype) for t in (means, quats, scales, opac, vm, Ks)]
    radii, m2d, depths, conics, o2d = ops.project(*ins, W, H, 0.3, 0.01, 1e10, 0.0, False)
    offs, ids = ops.bin_tiles(m2d, radii, depths, W, H, TILE, True)
    return m2d, conics, o2d, depths, offs, ids


@every_cpu_isa
@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_weight_stats_matches_reference(dtype):
    m2d, conics, o2d, depths, offs, ids = _projected(dtype)
    tau, K = 0.3, 3
    w_sum, w_max, n_views, top_ids, top_w = ops.weight_stats(m2d, conics, o2d, depths, offs, ids,
                                                             W, H, TILE, tau, K)
    d = lambda t: t.double()
    Wref = ref.blend_weights(d(m2d), d(conics), d(o2d), d(depths), W, H)["weights"]  # [C,H,W,N]
    tol = 1e-5 if dtype == F32 else 1e-10
    torch.testing.assert_close(w_sum.double(), Wref.sum((0, 1, 2)), atol=tol * 100, rtol=tol)
    torch.testing.assert_close(w_max.double(), Wref.amax((0, 1, 2)), atol=tol, rtol=tol)
    dom = (Wref > tau).any(dim=(1, 2)).sum(0).int()  # [N]
    near = ((Wref - tau).abs() < 1e-5).any(dim=(0, 1, 2))  # weights at the threshold: either way
    assert torch.equal(n_views[~near], dom[~near])
    assert n_views.sum() > 0 and (n_views >= 2).any()
    rv, ri = Wref.topk(K, dim=-1)
    torch.testing.assert_close(top_w.double(), rv, atol=tol, rtol=tol)
    # ids agree wherever the weight is positive and not tied with its neighbour in the ranking
    gap = torch.cat([rv[..., :-1] - rv[..., 1:], rv[..., -1:]], -1).abs()
    gap = torch.minimum(gap, torch.cat([rv[..., :1], rv[..., :-1] - rv[..., 1:]], -1).abs())
    ok = (rv > 0) & (gap > 1e-4)
    assert torch.equal(top_ids[ok].long(), ri[ok])
    assert (top_ids[rv == 0] == -1).all()
    assert (top_w[..., :-1] >= top_w[..., 1:]).all()


def test_weight_stats_top_k_zero_and_thread_independent():
    args = _projected(F32)
    out0 = ops.weight_stats(*args, W, H, TILE, 0.5, 0)
    assert out0[3].shape == (3, H, W, 0) and out0[4].shape == (3, H, W, 0)
    n = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ops.weight_stats(*args, W, H, TILE, 0.5, 2)
    finally:
        torch.set_num_threads(n)
    many = ops.weight_stats(*args, W, H, TILE, 0.5, 2)
    for a, b in zip(one, many):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out0[0], one[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_opcheck_weight_stats(dtype):
    args = _projected(dtype, N=9, C=2)
    res = torch.library.opcheck(torch.ops.gsrender.weight_stats, (*args, W, H, TILE, 0.5, 2))
    assert all(v == "SUCCESS" for v in res.values()), res


def test_weight_stats_bad_input_names_argument():
    m2d, conics, o2d, depths, offs, ids = _projected(F32)
    with pytest.raises(ValueError, match="conics"):
        ops.weight_stats(m2d, conics[..., :2], o2d, depths, offs, ids, W, H, TILE, 0.5, 2)
    with pytest.raises(TypeError, match="opacities"):
        ops.weight_stats(m2d, conics, o2d.double(), depths, offs, ids, W, H, TILE, 0.5, 2)
    with pytest.raises(ValueError, match="top_k"):
        ops.weight_stats(m2d, conics, o2d, depths, offs, ids, W, H, TILE, 0.5, -1)
    with pytest.raises(ValueError, match="tau_s"):
        ops.weight_stats(m2d, conics, o2d, depths, offs, ids, W, H, TILE, 1.5, 2)
    with pytest.raises(ValueError, match="tile_offsets"):
        ops.weight_stats(m2d, conics, o2d, depths, offs[:, :1], ids, W, H, TILE, 0.5, 2)
    with pytest.raises(ValueError, match="flatten_ids"):
        ops.weight_stats(m2d, conics, o2d, depths, offs, ids + 10_000, W, H, TILE, 0.5, 2)
