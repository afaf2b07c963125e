"""CUDA kernels of the application ops (weight_stats for SplitGS-Loc, contributors for VODA)
against their CPU kernels, which are themselves tested against the float64 reference."""
from __future__ import annotations

import pytest
import torch

from gsrender import ops
from tests.loc.test_loc_weight_stats import TILE, H, W, _projected

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
F32, F64 = torch.float32, torch.float64


def _cuda(args):
    return [a.cuda() for a in args]


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("K", [0, 1, 5])
def test_weight_stats_cuda_matches_cpu(dtype, K):
    args = _projected(dtype, N=60, seed=3)
    cpu = ops.weight_stats(*args, W, H, TILE, 0.3, K)
    gpu = [t.cpu() for t in ops.weight_stats(*_cuda(args), W, H, TILE, 0.3, K)]
    tol = 1e-5 if dtype == F32 else 1e-12
    torch.testing.assert_close(gpu[0], cpu[0], rtol=tol, atol=tol)  # Σw: atomics reorder sums
    assert torch.equal(gpu[1], cpu[1])  # max w, dominance and top-K are order-independent
    assert torch.equal(gpu[2], cpu[2])
    assert torch.equal(gpu[3], cpu[3])
    assert torch.equal(gpu[4], cpu[4])


def test_weight_stats_cuda_rejects_bad_binning():
    m2d, conics, o2d, depths, offs, ids = _cuda(_projected(F32))
    bad = ids.clone()
    bad[0] = 10**6
    with pytest.raises(ValueError, match="flatten_ids"):
        ops.weight_stats(m2d, conics, o2d, depths, offs, bad, W, H, TILE, 0.3, 2)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("pixels", ["all", "list"])
def test_contributors_cuda_matches_cpu(dtype, pixels):
    m2d, conics, o2d, depths, offs, ids = _projected(dtype, N=80, seed=5)
    pix = None
    if pixels == "list":  # a pixel list with padding rows
        g = torch.Generator().manual_seed(0)
        pix = torch.stack([torch.randint(0, W, (3, 50), generator=g),
                           torch.randint(0, H, (3, 50), generator=g)], -1).to(torch.int32)
        pix[:, -5:] = -1
    args = (m2d, conics, o2d, depths, offs, ids, W, H, TILE)
    cpu = ops.contributors(*args, pix, 24, 0.03, 0.0)
    gpu = [t.cpu() for t in ops.contributors(*_cuda(args), None if pix is None else pix.cuda(),
                                             24, 0.03, 0.0)]
    # one walk, one formula: the lists, clusters and counts are identical, weights to rounding
    for k in (0, 3, 4, 5):
        assert torch.equal(gpu[k], cpu[k]), k
    tol = 1e-6 if dtype == F32 else 1e-12
    torch.testing.assert_close(gpu[1], cpu[1], rtol=tol, atol=tol)
    torch.testing.assert_close(gpu[2], cpu[2], rtol=tol, atol=tol)
