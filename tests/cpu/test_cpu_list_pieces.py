"""The CPU sorted forward reads each tile's list in pieces, front to back, only as far as its
pixels need (rasterize_fwd_kernel.cpp: render_tile): its first piece is sized from the previous tile's
need, then doubled until every pixel saturated. A tile's outputs must be those of one pass over
its whole list whatever the previous tile was. Two one-tile cameras: camera 0's tile is opaque
(saturates within a few pairs of its list), camera 1's a transparent front layer before an
opaque one, so its first piece is too short and it is read again in longer pieces; rendered
alone, camera 1's tile comes first and reads its whole list at once. The backward reads each
tile's list only up to its deepest last contributor (rasterize_bwd_kernel.cpp: last_reach): its
gradients must be those of the whole list, the float64 reference's."""
from __future__ import annotations

import pytest
import torch

import gsrender.reference as ref
from gsrender import ops
from tests.conftest import every_cpu_isa

S = 16  # the image side: one 16-pixel tile per camera


def layer(g, n, opacity, sigma, z0, z1):
    """n isotropic Gaussians (σ px) over the image and a σ margin, depths in [z0, z1)."""
    inv = 1 / sigma ** 2
    return {"means2d": (S + 2 * sigma) * torch.rand(n, 2, generator=g) - sigma,
            "conics": torch.tensor([inv, 0.0, inv]).expand(n, 3),
            "opacities": torch.full((n,), opacity), "depths": z0 + (z1 - z0) * torch.rand(n, generator=g),
            "colors": torch.rand(n, 4, generator=g)}


def render(cams):
    """cams: per camera, its layers; every camera sees the Gaussians of every camera's layers
    and culls (radii 0) those of the others."""
    sc = {k: torch.cat([p[k] for ls in cams for p in ls]).expand(len(cams), -1, *([] if k in ("opacities", "depths") else [-1])).contiguous()
          for k in cams[0][0]}
    sizes = [sum(p["depths"].shape[0] for p in ls) for ls in cams]
    radii = torch.zeros(len(cams), sum(sizes), 2, dtype=torch.int32)
    for c, first in enumerate(torch.tensor([0] + sizes).cumsum(0)[:-1].tolist()):
        radii[c, first:first + sizes[c]] = 14
    offs, ids = ops.bin_tiles(sc["means2d"], radii, sc["depths"], S, S, S, True, sc["conics"], sc["opacities"])
    out = ops.rasterize(sc["means2d"], sc["conics"], sc["opacities"], sc["colors"], sc["depths"], None,
                        offs, ids, S, S, S, ops.SORTED, [0.05, 1.0, 1e-3])
    return out, offs.flatten().tolist() + [ids.shape[0]]


@every_cpu_isa
@pytest.mark.parametrize("seed", (0, 1))
def test_pieces_match_one_pass(seed):
    g = torch.Generator().manual_seed(seed)
    opaque = [layer(g, 600, 0.9, 4.0, 1.0, 2.0)]
    layered = [layer(g, 300, 0.02, 1.5, 0.5, 1.0), layer(g, 600, 0.9, 4.0, 1.0, 2.0)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread takes the tiles in order: camera 0's need sizes camera 1's piece
    try:
        (both, offs), (first, _), (alone, _) = render([opaque, layered]), render([opaque]), render([layered])
    finally:
        torch.set_num_threads(threads)
    need0 = (both[2][0] - offs[0]).max().item()
    n0, n1 = offs[1] - offs[0], offs[2] - offs[1]
    assert need0 < n0 and (both[2][1] - offs[1]).max() > int(need0 / n0 * 1.25 * n1) + 64  # a retry
    for k in (0, 1, 3):  # render, alphas, aux
        assert torch.equal(both[k][0], first[k][0]), k
        assert torch.equal(both[k][1], alone[k][0]), k
    assert torch.equal(both[2][0], first[2][0])  # last ids (tile-list positions)
    assert torch.equal(both[2][1] - offs[1], alone[2][0])
    assert torch.equal(both[4], torch.cat([first[4], alone[4]]))  # listed, evaluated, contributing lanes


@every_cpu_isa
def test_backward_past_the_deepest_contributor_reads_nothing():
    g = torch.Generator().manual_seed(2)
    cams = [[layer(g, 600, 0.9, 4.0, 1.0, 2.0)], [layer(g, 300, 0.02, 1.5, 0.5, 1.0), layer(g, 600, 0.9, 4.0, 1.0, 2.0)]]
    leaves = {k: torch.cat([p[k] for ls in cams for p in ls]).double().requires_grad_(True) for k in cams[0][0]}
    n = leaves["depths"].shape[0]
    C = len(cams)
    sc = {k: v.expand(C, *v.shape) for k, v in leaves.items()}
    radii = torch.full((C, n, 2), 14, dtype=torch.int32)
    offs, ids = ops.bin_tiles(sc["means2d"].detach(), radii, sc["depths"].detach(), S, S, S, True,
                              sc["conics"].detach(), sc["opacities"].detach())
    out = ops.rasterize(sc["means2d"], sc["conics"], sc["opacities"], sc["colors"], sc["depths"], None,
                        offs, ids, S, S, S, ops.SORTED, [0.05, 1.0, 1e-3])
    ends = offs.flatten().tolist()[1:] + [ids.shape[0]]
    for c in range(C):  # each tile saturates well before its list ends
        assert out[2][c].max() < ends[c] - 100, c
    g = torch.Generator().manual_seed(3)
    v_render = torch.randn(out[0].shape, generator=g, dtype=torch.float64)
    v_alpha = torch.randn(out[1].shape, generator=g, dtype=torch.float64)
    got = torch.autograd.grad((out[0] * v_render).sum() + (out[1] * v_alpha).sum(), list(leaves.values()),
                              allow_unused=True)
    e_render, e_alphas = ref.rasterize(sc["means2d"], sc["conics"], sc["opacities"], sc["colors"], sc["depths"],
                                       S, S)
    expected = torch.autograd.grad((e_render * v_render).sum() + (e_alphas * v_alpha).sum(),
                                   list(leaves.values()), allow_unused=True)
    for k, gk, ek in zip(leaves, got, expected):
        if k == "depths":  # sorted: depths only order the Gaussians
            continue
        rel = float((gk - ek).norm() / ek.norm())
        assert rel <= 1e-10, f"{k}: relative error {rel:.3g}"
