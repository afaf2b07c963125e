"""The CPU forward's feature accumulation (csrc/cpu/gemm.h) against the float64 reference.

Whole 8-channel vectors run channel-major in register blocks of up to 3 vectors × 4 pixels (the
last block of a row narrower), the last CH mod 8 channels pixel-major, and the tile's feature rows
are read from its contiguous copy (row_tile.h: TileFeatures). The feature widths here reach every
block remainder (CH / 8 = 1 … 5 vectors: blocks 1, 2, 3, 3+1, 3+2) with and without a pixel-major
tail, on images whose right-hand tile ends in a partial segment of 3 pixels (one pixel half, not
full) or 5 (the second half partial), so no lane outside the row is stored. The AVX-512 copy runs
float32 in 16-channel vectors, blocks of up to 6 × 4 pixels, an odd 8-channel vector as one of 8:
CH = 16 … 116 reach its blocks 1 … 6 and 6+1, with and without that vector and the tail.
"""
from __future__ import annotations

import pytest

from tests.conftest import F32, F64, every_cpu_isa, random_scene
from tests.render.test_rasterize import check


@every_cpu_isa
@pytest.mark.parametrize("width", [19, 29])  # 16-px tiles: the last one 3 or 13 = 8 + 5 px wide
# CH = D + 4 = 8, 16, 25, 32, 43, 57 (16-channel vectors: 3 + 8 + 1), 64, 84, 108 (6 + 8 + 4), 116
@pytest.mark.parametrize("D", [4, 12, 21, 28, 39, 53, 60, 80, 104, 112])
def test_feature_widths_and_partial_segments(D, width):
    scene = random_scene(N=200, C=2, width=width, height=13, seed=21 + D, D=D)
    for mode in ("sorted", "weighted"):
        for dtype in (F64, F32):
            out, _ = check(scene, dtype, mode)
            assert out.features.shape == (2, 13, width, D)
