"""The CPU row rasterizer's pruning never drops a pair that contributes: the exact test of the
support ellipse against each tile (not its bounding box), the per-row buckets and the 8-pixel
segments. Needle-shaped and tiny Gaussians straddling tile corners against the float64
reference, in both modes; tile sizes that are not multiples of the 8-pixel segment, forward and
backward, agree with the default tiling."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tests.conftest import F32, F64, random_scene, render
from tests.render.test_rasterize import check


def needles(seed: int = 3):
    # log-uniform scales over two decades per axis: many needles and specks at tile corners
    return random_scene(N=400, C=1, width=70, height=45, seed=seed, D=5, scale_range=(0.003, 0.5))


@pytest.mark.parametrize("mode", ("sorted", "weighted"))
@pytest.mark.parametrize("dtype", (F64, F32))
def test_needles_match_reference(mode, dtype):
    check(needles(), dtype, mode)


@pytest.mark.parametrize("tile", (1, 5, 13, 24, 29, 40))  # 1 to 5 row segments
def test_tile_size_changes_nothing(tile):
    s = needles(seed=4)
    leaves = [t.clone().requires_grad_(True) for t in (s.means, s.scales, s.opacities, s.features)]

    def run(ts):
        sc = replace(s, means=leaves[0], scales=leaves[1], opacities=leaves[2], features=leaves[3])
        out = render(sc, tile_size=ts)
        loss = (out.colors * torch.linspace(0.5, 1.5, 3, dtype=F64)).sum() + out.features.square().sum() \
            + out.alphas.sum() + out.depths.sum()
        grads = torch.autograd.grad(loss, leaves)
        return [out.colors, out.features, out.alphas, out.depths, *grads]

    for got, exp in zip(run(tile), run(16)):
        torch.testing.assert_close(got, exp, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("seed", (5, 6, 7))
def test_row_crossings_keep_every_lit_pixel(seed):
    # Each row visits only the segments where the Gaussian's support ellipse crosses it: needles at
    # every angle (scales over three decades) must still light exactly the reference's pixels.
    s = random_scene(N=300, C=1, width=53, height=37, seed=seed, D=2, scale_range=(0.001, 0.6))
    check(s, F64, "sorted")
    check(s, F32, "sorted")
