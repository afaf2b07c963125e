"""The CPU backward's products (csrc/cpu/gemm.h). The feature gradient v_F += Wᵀ·G (pair_outer):
register blocks of R pairs × NB channel vectors (8 channels; 16 in the AVX-512 copy from
CH = 16), rows padded to whole vectors. The widths here reach every channel-block remainder
(CH = D + 4 = 20 … 116, with padding and without), on
scenes whose segments hold many pairs (every pair-count remainder of the R-pair blocks).
Against the float64 backward under every ISA copy this CPU runs, and bit for bit between the
AVX-512 and AVX2 copies. (The baseline copy differs from them in the last bits, as it did at
b39febd before this test: not a claim this test makes.) The weight gradient dL/dw = G·f
(pair_dots; in channel pairs in the AVX-512 copy from CH = 16) through the geometry gradients."""
from __future__ import annotations

import pytest
import torch

import gsrender
from gsrender import _C
from tests.conftest import F32, F64, random_scene


def _feature_grad(scene, dtype):
    s = scene.cast(dtype)
    feats = s.features.clone().requires_grad_(True)
    out = gsrender.rasterize(s.means, s.quats, s.scales, s.opacities, s.colors, s.viewmats, s.Ks,
                             s.width, s.height, features=feats, backend="cpu")
    cot = torch.randn(out.features.shape, generator=torch.Generator().manual_seed(3), dtype=F64)
    (out.features * cot.to(dtype)).sum().backward()
    return feats.grad


@pytest.mark.parametrize("D", [16, 21, 28, 44, 60, 76, 92, 112])
def test_feature_gradient_blocks_match_float64_and_every_copy(D):
    scene = random_scene(N=400, C=1, width=37, height=21, seed=40 + D, D=D, scale_range=(0.05, 0.4))
    expected = _feature_grad(scene, F64)
    active, grads = _C.cpu_isa(), {}
    try:
        for isa in _C.cpu_isas():
            _C.set_cpu_isa(isa)
            grads[isa] = _feature_grad(scene, F32)
    finally:
        _C.set_cpu_isa(active)
    assert float(expected.norm()) > 0
    for isa, g in grads.items():
        assert float((g.double() - expected).norm() / expected.norm()) <= 1e-5, isa
    if "avx512" in grads and "avx2" in grads:
        assert torch.equal(grads["avx512"], grads["avx2"])


def _geometry_grads(scene, dtype):
    """The gradients that flow through dL/dw = G·f (gemm.h pair_dots / pair_dots_paired): means,
    scales, opacities, under random cotangents on the colours and the features."""
    s = scene.cast(dtype)
    leaves = [t.clone().requires_grad_(True) for t in (s.means, s.scales, s.opacities)]
    out = gsrender.rasterize(leaves[0], s.quats, leaves[1], leaves[2], s.colors, s.viewmats, s.Ks,
                             s.width, s.height, features=s.features, backend="cpu")
    g = torch.Generator().manual_seed(5)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=F64).to(dtype)).sum()
               for o in (out.colors, out.features))
    loss.backward()
    return [t.grad for t in leaves]


@pytest.mark.parametrize("D", [11, 12, 13, 21, 64])
def test_weight_gradient_in_channel_pairs_matches_float64_and_every_copy(D):
    """CH = D + 4 = 15 (channel-major), 16, 17, 25 (pairs, the odd ones ending in a zero channel)
    and 68, with every pair-count remainder of the R-pair blocks: against the float64 backward
    under every ISA copy (AVX-512 runs the paired path from CH = 16, the others channel-major)."""
    scene = random_scene(N=400, C=1, width=37, height=21, seed=70 + D, D=D, scale_range=(0.05, 0.4))
    expected = _geometry_grads(scene, F64)
    active = _C.cpu_isa()
    try:
        for isa in _C.cpu_isas():
            _C.set_cpu_isa(isa)
            for name, g, e in zip(("means", "scales", "opacities"), _geometry_grads(scene, F32),
                                  expected):
                assert float(e.norm()) > 0
                assert float((g.double() - e).norm() / e.norm()) <= 1e-4, (isa, name)
    finally:
        _C.set_cpu_isa(active)
