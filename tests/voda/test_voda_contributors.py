"""The `contributors` op (VODA's depth-aware rasterizer, CPU): weights, depths and order match the
renderer and the float64 reference, clusters on hand-built rays, the walk past the stop, pixel
sets, opcheck and bad inputs."""
from __future__ import annotations

import pytest
import torch

import gsrender
from gsrender import ops
from gsrender import reference as ref
from tests.conftest import F32, F64, every_cpu_isa, random_scene

OPS = torch.ops.gsrender
TILE = 16


def _render(scene, dtype):
    s = scene.cast(dtype)
    return gsrender.rasterize(*s.inputs(), precision="fp32", tile_size=TILE)


def _contrib(out, scene, pixels=None, K=256, tau_rel=0.03, tau_abs=0.0):
    m = out.meta
    return ops.contributors(m["means2d"], m["conics"], m["opacities"], m["depths"],
                            m["tile_offsets"], m["flatten_ids"], scene.width, scene.height, TILE,
                            pixels, K, tau_rel, tau_abs)


@every_cpu_isa
@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
def test_weights_before_stop_sum_to_rendered_alpha(dtype):
    scene = random_scene(N=250, C=2, width=40, height=30, seed=3, bg=False)
    out = _render(scene, dtype)
    ids, w, zs, _, counts, n_render = _contrib(out, scene)
    C, H, W = scene.C, scene.height, scene.width
    k = torch.arange(w.shape[-1])
    before = (k < n_render[..., None]).to(dtype)
    total = (w * before).sum(-1).reshape(C, H, W)
    tol = 1e-12 if dtype == F64 else 2e-6
    torch.testing.assert_close(total, out.alphas[..., 0], atol=tol, rtol=0)
    assert (counts >= n_render).all() and (counts > n_render).any(), "some pixels saturate"
    # depths are the views' z of the listed Gaussians, front to back
    m_depth = out.meta["depths"]
    for c in range(C):
        valid = ids[c] >= 0
        torch.testing.assert_close(zs[c][valid], m_depth[c][ids[c][valid].long()])
    dz = torch.where((ids[..., 1:] >= 0), zs[..., 1:] - zs[..., :-1], torch.zeros_like(zs[..., 1:]))
    assert (dz >= 0).all()


def test_weights_match_reference_blend_weights():
    scene = random_scene(N=120, C=2, width=32, height=24, seed=5, bg=False)
    out = _render(scene, F64)
    m = out.meta
    valid = m["radii"].gt(0).any(-1)
    dense = ref.blend_weights(m["means2d"], m["conics"], m["opacities"], m["depths"], scene.width,
                              scene.height, valid=valid)["weights"]  # [C,H,W,N]
    ids, w, _, _, _, n_render = _contrib(out, scene)
    C, P, K = w.shape
    k = torch.arange(K)
    keep = (k < n_render[..., None]) & (ids >= 0)
    mine = torch.zeros(C, P, scene.N, dtype=F64).scatter_add_(
        2, ids.long().clamp_min(0), torch.where(keep, w, torch.zeros_like(w)))
    torch.testing.assert_close(mine, dense.reshape(C, P, scene.N), atol=1e-10, rtol=0)


def _ray_scene(depths, opacities, size=16):
    """Isotropic wide Gaussians all centred on pixel (8, 8)'s centre: α = opacity there."""
    n = len(depths)
    m2d = torch.tensor([[8.5, 8.5]], dtype=F64).repeat(1, n, 1)  # [1, N, 2]
    conics = torch.tensor([[0.01, 0.0, 0.01]], dtype=F64).repeat(1, n, 1)
    opac = torch.tensor([opacities], dtype=F64)
    z = torch.tensor([depths], dtype=F64)
    radii = torch.full((1, n, 2), 40, dtype=torch.int32)
    offsets, flat = ops.bin_tiles(m2d, radii, z, size, size, TILE, True)
    return m2d, conics, opac, z, offsets, flat


def _ray(depths, opacities, K=16, tau_rel=0.03, tau_abs=0.0):
    m2d, conics, opac, z, offsets, flat = _ray_scene(depths, opacities)
    pix = torch.tensor([[[8, 8]]], dtype=torch.int32)
    ids, w, _, cl, counts, n_render = ops.contributors(m2d, conics, opac, z, offsets, flat, 16,
                                                        16, TILE, pix, K, tau_rel, tau_abs)
    n = int(counts[0, 0])
    return ids[0, 0, :n].tolist(), w[0, 0, :n], cl[0, 0, :n].tolist(), int(n_render[0, 0])


def test_clusters_on_a_hand_built_ray():
    # gaps: 0.01, 0.01 (< 0.03·z), 0.98 (new), 0.05 (< 0.06), 0.95 (new); listed out of order
    depths = [2.0, 1.0, 3.0, 1.02, 2.05, 1.01]
    ids, w, cl, n_render = _ray(depths, [0.3] * 6)
    assert ids == [1, 5, 3, 0, 4, 2]
    assert cl == [0, 0, 0, 1, 1, 2]
    assert n_render == 6
    T = torch.cumprod(torch.tensor([1.0] + [0.7] * 5, dtype=F64), 0)
    torch.testing.assert_close(w, 0.3 * T)
    # tau_abs widens clusters: with 1.0 absolute slack, everything is one cluster
    assert _ray(depths, [0.3] * 6, tau_abs=1.0)[2] == [0] * 6


def test_walk_continues_past_the_stop_until_the_cluster_closes():
    # α = 0.98: T = 1, 0.02, 4e-4, then 8e-6 < 1e-4: the renderer stops at entry 2
    depths = [1.0, 1.01, 1.02, 1.03, 1.04, 2.0, 2.01]
    ids, w, cl, n_render = _ray(depths, [0.98] * 7)
    assert n_render == 2
    assert ids == [0, 1, 2, 3, 4], "the front cluster is listed whole, the next one not at all"
    assert cl == [0] * 5
    torch.testing.assert_close(w[2], torch.tensor(0.98 * 4e-4, dtype=F64))
    # when the stop falls at the start of a new cluster, that cluster is the one completed
    ids, _, cl, n_render = _ray([1.0, 1.01, 2.0, 2.01, 2.02, 3.0], [0.98] * 6)
    assert (n_render, ids, cl) == (2, [0, 1, 2, 3, 4], [0, 0, 1, 1, 1])


def test_K_max_bounds_the_list():
    ids, _, _, n_render = _ray([1.0 + 0.01 * i for i in range(10)], [0.2] * 10, K=4)
    assert ids == [0, 1, 2, 3] and n_render == 4


def test_pixel_lists_and_masks_agree_with_all_pixels():
    scene = random_scene(N=150, C=2, width=36, height=28, seed=7, bg=False)
    out = _render(scene, F32)
    full = _contrib(out, scene, K=64)
    g = torch.Generator().manual_seed(0)
    mask = torch.rand(scene.C, scene.height, scene.width, generator=g) < 0.2
    mask[1, :, :] = False
    mask[1, 3, 4] = True  # camera 1: one pixel, the rest padding
    pix = ops.mask_to_pixels(mask)
    assert pix.shape[1] == int(mask[0].sum()) and (pix[1, 1:] == -1).all()
    for pixels in (pix, mask):
        sub = _contrib(out, scene, pixels, K=64)
        for c in range(scene.C):
            n = int(mask[c].sum())
            flat = pix[c, :n, 1].long() * scene.width + pix[c, :n, 0].long()
            for a, b in zip(sub, full):
                torch.testing.assert_close(a[c, :n], b[c, flat])
            assert (sub[0][c, n:] == -1).all() and (sub[4][c, n:] == 0).all()


def _small_inputs(dtype):
    scene = random_scene(N=40, C=2, width=20, height=18, seed=9, bg=False)
    out = _render(scene, dtype)
    m = out.meta
    return (m["means2d"], m["conics"], m["opacities"], m["depths"], m["tile_offsets"],
            m["flatten_ids"], 20, 18, TILE)


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("with_pixels", [False, True])
def test_opcheck_contributors(dtype, with_pixels):
    args = _small_inputs(dtype)
    pix = torch.tensor([[[0, 0], [5, 7], [-1, -1]], [[19, 17], [3, 3], [10, 2]]],
                       dtype=torch.int32) if with_pixels else None
    # test_aot_dispatch_dynamic is left out for the reason test_opcheck.py gives for project_fwd:
    # opcheck's harness sums outputs into an accumulator typed by the first output (ids, int32)
    res = torch.library.opcheck(OPS.contributors, (*args, pix, 8, 0.03, 0.0),
                                test_utils=("test_schema", "test_autograd_registration",
                                            "test_faketensor"))
    assert all(v == "SUCCESS" for v in res.values()), res


@pytest.mark.parametrize("change, err, word", [
    ({"K": 0}, ValueError, "K_max"),
    ({"K": 5000}, ValueError, "K_max"),
    ({"tau_rel": -0.1}, ValueError, "tau_rel"),
    ({"tau_abs": float("nan")}, ValueError, "tau_abs"),
    ({"pixels": torch.tensor([[[20, 0]], [[0, 0]]], dtype=torch.int32)}, ValueError, "pixels"),
    ({"pixels": torch.tensor([[[-1, 0]], [[0, 0]]], dtype=torch.int32)}, ValueError, "pixels"),
    ({"pixels": torch.zeros(2, 1, 2, dtype=torch.int64)}, TypeError, "pixels"),
    ({"pixels": torch.zeros(3, 1, 2, dtype=torch.int32)}, ValueError, "pixels"),
    ({"pixels": torch.zeros(2, 3, 3, dtype=torch.bool)}, ValueError, "pixels"),
    ({"depths": "f64"}, TypeError, "depths"),
    ({"depths": "shape"}, ValueError, "depths"),
])
def test_bad_inputs_name_the_argument(change, err, word):
    m2d, conics, opac, z, offsets, flat, W, H, tile = _small_inputs(F32)
    if change.get("depths") == "f64":
        z = z.double()
    elif change.get("depths") == "shape":
        z = z[:, :-1]
    kw = {"pixels": change.get("pixels"), "K_max": change.get("K", 8),
          "tau_rel": change.get("tau_rel", 0.03), "tau_abs": change.get("tau_abs", 0.0)}
    with pytest.raises(err, match=word):
        ops.contributors(m2d, conics, opac, z, offsets, flat, W, H, tile, **kw)
