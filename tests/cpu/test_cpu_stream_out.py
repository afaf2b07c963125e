"""The CPU writes outputs of 64 MB and more with streaming stores (stream_store.h: kStreamMin).
The forward raster composes each 8-pixel segment in a buffer and copies it out as whole cache
lines; smaller renders, segments at the image's right edge and CH that do not make whole lines are
stored in place. A tile's pixels do not depend on the image's height, so the top rows of a 512²
render at CH = 64 (64 MB in float32, 128 MB in float64: streamed) must be bitwise those of the
same Gaussians rendered 192 rows high (24 / 48 MB: stored in place), with and without a
background, in both modes, under every ISA copy. sh_channels_fwd streams rows of 16-byte
multiples: its 64 MB output must be bitwise the same Gaussians' channels computed in pieces small
enough to be stored in place."""
from __future__ import annotations

import pytest
import torch

import gsrender.ops as ops
from tests.conftest import F32, F64, cameras, every_cpu_isa

W, H, H_SMALL, CH = 512, 512, 192, 64


def render(proj, colors, bg, height, mode):
    radii, means2d, depths, conics, opac = proj
    offs, ids = ops.bin_tiles(means2d, radii, depths, W, height, 16, mode == ops.SORTED, conics, opac)
    return ops.rasterize(means2d, conics, opac, colors, depths, bg, offs, ids, W, height, 16, mode,
                         [0.05, 1.0, 1e-3])


@every_cpu_isa
@pytest.mark.parametrize("dtype", (F32, F64), ids=("f32", "f64"))
@pytest.mark.parametrize("mode", (ops.SORTED, ops.WEIGHTED), ids=("sorted", "weighted"))
@pytest.mark.parametrize("with_bg", (False, True), ids=("no_bg", "bg"))
def test_streamed_rows_equal_rows_stored_in_place(dtype, mode, with_bg):
    g = torch.Generator().manual_seed(3)
    n = 4000
    means = torch.randn(n, 3, generator=g, dtype=dtype) * 0.8
    quats = torch.randn(n, 4, generator=g, dtype=dtype)
    scales = torch.exp(torch.empty(n, 3, dtype=dtype).uniform_(-4.5, -2.0, generator=g))
    opacities = torch.empty(n, dtype=dtype).uniform_(0.05, 0.99, generator=g)
    vm, K = (x.to(dtype) for x in cameras(1, W, H, seed=5))
    proj = ops.project(means, quats, scales, opacities, vm, K, W, H, 0.3, 0.01, 1e10, 0.0, False)
    colors = torch.rand(1, n, CH, generator=g, dtype=dtype)
    bg = torch.rand(1, CH, generator=g, dtype=dtype) if with_bg else None
    big = render(proj, colors, bg, H, mode)
    assert big[0].nbytes >= 64 << 20  # streamed (kStreamMin)
    small = render(proj, colors, bg, H_SMALL, mode)
    assert small[0].nbytes < 64 << 20  # stored in place
    assert float(small[1].mean()) > 0.2  # pixels are covered
    for k in range(4):  # render, alphas, last ids, aux
        assert torch.equal(big[k][:, :H_SMALL], small[k]), k


@every_cpu_isa
@pytest.mark.parametrize("dtype", (F32, F64), ids=("f32", "f64"))
@pytest.mark.parametrize("per_camera", (False, True), ids=("shared", "per_camera"))
def test_streamed_channels_equal_channels_stored_in_place(dtype, per_camera):
    g = torch.Generator().manual_seed(4)
    n, d, piece = 65536, 252, 8192  # [1, n, 4 + d]: 64 MB in float32, streamed; pieces 8 MB
    means = torch.randn(n, 3, generator=g, dtype=dtype)
    campos = torch.tensor([[0.3, -0.2, -4.0]], dtype=dtype)
    coeffs = 0.3 * torch.randn(n, 16, 3, generator=g, dtype=dtype)
    depths = torch.rand(1, n, generator=g, dtype=dtype) + 1
    feats = torch.rand(*((1,) if per_camera else ()), n, d, generator=g, dtype=dtype)
    whole = ops.sh_channels(3, means, campos, coeffs, depths, feats)
    assert whole.nbytes >= 64 << 20
    for i in range(0, n, piece):
        part = ops.sh_channels(3, means[i:i + piece], campos, coeffs[i:i + piece],
                               depths[:, i:i + piece], feats[..., i:i + piece, :])
        assert part.nbytes < 64 << 20
        assert torch.equal(whole[:, i:i + piece], part), i
