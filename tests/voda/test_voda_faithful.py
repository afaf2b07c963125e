"""VODA's one-factor mechanisms (renderer-only membership, α floor, ray-depth clusters, scaled
volumetric weight, object-edge boundary band), the multi-view agreement readout, the oracle,
the seen-surface mask and the diagnostics."""
from __future__ import annotations

import math

import pytest
import torch

from gsrender import reference as ref
from gsrender.voda import removal3d as R
from gsrender.voda.agreement import agree, label_shares
from gsrender.voda.baselines import IdentityBaseline, OracleBaseline, make_baseline
from gsrender.voda.clusters import TAU_ABS, TAU_REL, Contributors, depth_contributors, rendered_only
from gsrender.voda.diagnostics import added_past_stop, missed_profile
from gsrender.voda.evaluate import eval_views, evaluate
from gsrender.voda.loss import VodaConfig, boundary_weights, voda_loss
from gsrender.voda.raydepth import RayGeometry, pixel_rays, ray_clusters, ray_depths
from gsrender.voda.seen import backproject, seen_surface, visible_in
from gsrender.voda.train import TILE, frozen_views, train_features, voda_contributors

I32 = torch.int32


def _shells():
    """A sphere of nested opaque shells: many pixels list Gaussians past the renderer's stop."""
    model = R.layered_object("sphere", (0.0, 0.0, 0.0), 0.8, (0.8, 0.2, 0.2), 1, 500, seed=0)
    vm, K = R.S.orbit_cameras(2, 2.0, 0.5, width=48, height_px=40, fov_deg=45.0)
    labels, _ = R.instance_masks(model, 1, vm, K, 48, 40)
    return model, vm, K, 48, 40, labels


@pytest.fixture(scope="module")
def shells():
    model, vm, K, W, H, labels = _shells()
    return model, vm, K, W, H, labels, frozen_views(model, vm, K, W, H, labels)


def _object_pixels(view):
    return torch.nonzero(view.labels == 1).flip(-1).to(I32)[None]  # [1, P, 2] (x, y)


def test_entry_alphas_reproduce_the_renderers_weights(shells):
    *_, views = shells
    v = views[0]
    c = depth_contributors(v.meta, v.width, v.height, _object_pixels(v), K_max=256)
    # before the stop w_k = α_k · Π_{j<k} (1 − α_j)
    k = torch.arange(c.ids.shape[-1])
    before = c.valid & (k < c.n_render[..., None])
    T = torch.cumprod(torch.cat([torch.ones_like(c.alphas[..., :1]), 1 - c.alphas[..., :-1]], -1),
                      -1)
    torch.testing.assert_close(c.weights[before], (c.alphas * T)[before], atol=2e-6, rtol=1e-4)
    assert (c.alphas[before] >= 1 / 255 - 1e-6).all() and (c.alphas[~c.valid] == 0).all()


def test_rendered_membership_stops_at_the_renderers_stop(shells):
    *_, views = shells
    v = views[0]
    pix = _object_pixels(v)
    walk = voda_contributors(v, pix, VodaConfig(K_max=256, membership="walk"))
    ren = voda_contributors(v, pix, VodaConfig(K_max=256, membership="rendered"))
    assert (walk.counts > walk.n_render).any(), "the walk lists entries past the stop"
    assert torch.equal(ren.counts, walk.n_render)
    k = torch.arange(walk.ids.shape[-1])
    prefix = k < walk.n_render[..., None]
    assert torch.equal(ren.ids[prefix], walk.ids[prefix])
    assert (ren.ids[~prefix] == -1).all() and not ren.past_stop.any()
    b = IdentityBaseline(views[0].meta["means2d"].shape[1], 2, seed=0)
    lab = torch.ones(1, pix.shape[1], dtype=torch.long)
    _, i_walk = voda_loss(b.features, walk, lab, b.score, b.pixel_loss, None, VodaConfig())
    _, i_ren = voda_loss(b.features, ren, lab, b.score, b.pixel_loss, None, VodaConfig())
    assert i_walk["member_past_stop"].any() and not i_ren["member_past_stop"].any()
    assert i_ren["members"] < i_walk["members"]


def _hand_contrib(alphas):
    """One pixel, one cluster of 3 Gaussians with the given α."""
    ids = torch.tensor([[[0, 1, 2]]], dtype=I32)
    a = torch.tensor([[alphas]])
    T = torch.cumprod(torch.cat([torch.ones(1, 1, 1), 1 - a[..., :-1]], -1), -1)
    return Contributors(ids, a * T, torch.tensor([[[1.0, 1.01, 1.02]]]),
                        torch.zeros(1, 1, 3, dtype=I32), torch.tensor([[3]], dtype=I32),
                        torch.tensor([[3]], dtype=I32), a)


def test_alpha_floor_leaves_out_grazing_members():
    c = _hand_contrib([0.6, 0.05, 0.3])
    f = torch.zeros(3, 2, requires_grad=True)
    one = lambda F, lab: torch.ones(F.shape[:-1])
    pix = lambda F, lab: F.sum(-1)
    lab = torch.tensor([[1]])
    _, info = voda_loss(f, c, lab, one, pix, None, VodaConfig())
    assert info["members"] == 3
    _, info = voda_loss(f, c, lab, one, pix, None, VodaConfig(alpha_floor=0.1))
    assert info["member_ids"].tolist() == [0, 2]
    with pytest.raises(ValueError, match="alphas"):
        voda_loss(f, Contributors(*[getattr(c, n) for n in ("ids", "weights", "zs", "clusters",
                                                            "counts", "n_render")]),
                  lab, one, pix, None, VodaConfig(alpha_floor=0.1))
    with pytest.raises(ValueError, match="alpha_floor"):
        VodaConfig(alpha_floor=1.0)


def test_ray_depth_is_the_density_peak_along_the_pixel_ray():
    g = torch.Generator().manual_seed(0)
    n = 6
    means = torch.randn(n, 3, generator=g, dtype=torch.float64) * 0.3
    quats = torch.randn(n, 4, generator=g, dtype=torch.float64)
    scales = torch.rand(n, 3, generator=g, dtype=torch.float64) * 0.2 + 0.01
    m = ref.quat_to_rotmat(quats) / scales[:, None, :]
    geom = RayGeometry(means, m @ m.transpose(-1, -2))
    vm, K = R.S.orbit_cameras(1, 3.0, 0.3, width=40, height_px=30, fov_deg=50.0)
    vm, K = vm[0].double(), K[0].double()
    pixels = torch.tensor([[20, 15], [5, 7], [33, 22]], dtype=I32)
    ids = torch.arange(n, dtype=I32).expand(3, n).clone()
    ids[2, -1] = -1
    zp, zs = ray_depths(geom, vm, K, pixels, ids)
    o, d = pixel_rays(vm, K, pixels)
    z = torch.linspace(0.5, 6.0, 200001, dtype=torch.float64)
    for p in range(3):
        # the ray's points are at view depth z
        cam = (o + 2.0 * d[p]) @ vm[:3, :3].T + vm[:3, 3]
        assert float(cam[2]) == pytest.approx(2.0, abs=1e-6)  # viewmat from f32
        for i in range(n - (p == 2)):
            x = o + z[:, None] * d[p] - means[i]
            q = ((x @ geom.precisions[i]) * x).sum(-1)  # Mahalanobis² along the ray
            j = int(q.argmin())
            assert float(zp[p, i]) == pytest.approx(float(z[j]), abs=1e-4)
            # q rises by 1 at one σ_z from the peak
            x1 = o + (zp[p, i] + zs[p, i]) * d[p] - means[i]
            assert float(((x1 @ geom.precisions[i]) * x1).sum()) == pytest.approx(
                float(q[j]) + 1.0, abs=1e-3)
    assert zp[2, -1] == 0 and zs[2, -1] == 0


def test_ray_clusters_bound_the_span_and_need_overlapping_extents():
    # a chain whose gaps (0.02) the op's rule (gap > 0.03·z) never splits; extents overlap
    z = torch.tensor([[1.00, 1.02, 1.04, 1.06, 1.08]])
    s = torch.full_like(z, 0.015)
    ok = torch.ones_like(z, dtype=torch.bool)
    assert ray_clusters(z, s, ok, span_rel=0.05).tolist() == [[0, 0, 0, 1, 1]]
    assert ray_clusters(z, s, ok, span_rel=1.0).tolist() == [[0, 0, 0, 0, 0]]
    # thin Gaussians whose extents do not meet: separate clusters even within the span
    assert ray_clusters(z, torch.full_like(z, 0.001), ok, span_rel=1.0).tolist() == [
        [0, 1, 2, 3, 4]]
    # the entries' order does not matter, only z*; invalid entries get -1
    perm = torch.tensor([3, 0, 4, 1, 2])
    ok2 = ok.clone()
    ok2[0, 2] = False
    got = ray_clusters(z[:, perm], s[:, perm], ok2, span_rel=0.05)
    assert got.tolist() == [[1, 0, -1, 0, 0]]


def test_boundary_band_between_objects_only():
    lab = torch.tensor([[[0, 0, 1, 1, 2, 2, 0, -1]]])
    every = boundary_weights(lab, radius=1, weight=2.0)[0, 0].tolist()
    objs = boundary_weights(lab, radius=1, weight=2.0, between="objects")[0, 0].tolist()
    assert every == [1, 3, 3, 3, 3, 3, 3, 3]
    assert objs == [1, 1, 1, 3, 3, 1, 1, 1]  # only where object 1 meets object 2
    with pytest.raises(ValueError, match="between"):
        boundary_weights(lab, between="edges")


def test_scaled_volumetric_weight_is_the_baselines_loss_scale(shells):
    model, *_, views = shells
    cfg = VodaConfig(warmup=0, n_pixels=64, lambda_pix=0.0, K_max=128)
    losses = {}
    for name, voda in (("base", None), ("voda", cfg), ("scaled", VodaConfig(
            **{**cfg.__dict__, "scale_vol": True}))):
        b = make_baseline("gg-2d", model.means, 2, len(views), seed=0)
        losses[name] = train_features(b, views, 1, voda, seed=0)["losses"][0]
    ratio = (losses["scaled"] - losses["base"]) / (losses["voda"] - losses["base"])
    assert ratio == pytest.approx(1 / math.log(256), rel=1e-4)


def test_training_reports_which_members_came_past_the_stop(shells):
    model, *_, views = shells
    got = {}
    for m in ("walk", "rendered"):
        b = IdentityBaseline(model.num_gaussians, 2, seed=0)
        res = train_features(b, views, 4, VodaConfig(warmup=0, n_pixels=256, K_max=128,
                                                     membership=m), seed=0)
        got[m] = res["members"]
    assert got["walk"]["past_stop"].any() and got["walk"]["rendered"].any()
    assert not got["rendered"]["past_stop"].any() and got["rendered"]["rendered"].any()


def test_label_shares_against_dense_reference(shells):
    model, vm, K, W, H, labels, _ = shells
    # two labels split the image, so Gaussians straddling the split get shares in between
    lab = labels.clone()
    lab[:, :, W // 2:] *= 2
    lab[:, :3] = -1  # unlabelled rows count for nothing
    views = frozen_views(model, vm, K, W, H, lab)
    shares, truncated = label_shares(views, 3, chunk=500)
    assert truncated == 0
    num = torch.zeros(model.num_gaussians, 3, dtype=torch.float64)
    for v, L in zip(views, lab):
        m = {k: t.detach().double() for k, t in v.meta.items() if k in (
            "means2d", "conics", "opacities", "depths")}
        w = ref.blend_weights(m["means2d"], m["conics"], m["opacities"], m["depths"], W, H,
                              valid=v.meta["radii"].gt(0).any(-1))["weights"][0]  # [H,W,N]
        y, x = torch.meshgrid(torch.arange(H) + 0.5, torch.arange(W) + 0.5, indexing="ij")
        d = m["means2d"][0][None, None] - torch.stack([x, y], -1).double()[:, :, None]
        a, b, c = m["conics"][0].unbind(-1)
        sig = 0.5 * (a * d[..., 0] ** 2 + c * d[..., 1] ** 2) + b * d[..., 0] * d[..., 1]
        alpha = (m["opacities"][0] * torch.exp(-sig)).clamp_max(0.99) * (w > 0)
        for k in range(3):
            num[:, k] += (alpha * (L == k)[..., None]).sum((0, 1))
    want = num / num.sum(1, keepdim=True).clamp_min(1e-30)
    torch.testing.assert_close(shares.double(), want, atol=2e-4, rtol=0)
    assert ((shares[:, 1] > 0.05) & (shares[:, 2] > 0.05)).any()
    sel = torch.ones(model.num_gaussians, dtype=torch.bool)
    assert torch.equal(agree(sel, shares, 2), shares[:, 2] > 0.5)
    assert not agree(~sel, shares, 2).any()


def test_oracle_removes_the_true_set_exactly():
    model, n = R.make_scene_model("isolated", 0, n_objects=2, n_per_object=200, n_floor=400,
                                  n_walls=200)
    vm, K = R.cameras(48, 36, 1, 4)
    masks, _ = R.instance_masks(model, n, vm, K, 48, 36)
    ev = eval_views(model, n, vm, K, 48, 36, masks)
    res = evaluate(model, OracleBaseline(model.object_ids, n + 1), ev)
    assert res["nrde"] == pytest.approx(0.0, abs=1e-9)
    assert res["gaussian_iou"] == 1.0 and res["recall_q1"] == 1.0
    swapped = torch.where(model.object_ids > 0, 3 - model.object_ids, model.object_ids)
    assert evaluate(model, OracleBaseline(swapped, n + 1), ev)["nrde"] > 0.5


def test_seen_surface_is_the_training_views_unoccluded_surface():
    vm, K = R.S.orbit_cameras(2, 2.0, 0.5, width=32, height_px=24, fov_deg=45.0)
    depth = torch.full((2, 24, 32), 2.0)
    alpha = torch.ones(2, 24, 32)
    pts = backproject(depth[0], vm[0], K[0])
    assert visible_in(pts, vm[0], K[0], depth[0], alpha[0]).all()
    # behind the training view's surface (occluded) or in front of it (not a surface): unseen
    assert not visible_in(backproject(depth[0] * 1.1, vm[0], K[0]), vm[0], K[0], depth[0],
                          alpha[0]).any()
    assert not visible_in(backproject(depth[0] * 0.9, vm[0], K[0]), vm[0], K[0], depth[0],
                          alpha[0]).any()
    seen = seen_surface(depth[:1], alpha[:1], vm[:1], K[:1], vm, K, depth, alpha)
    assert seen.all()
    seen = seen_surface(depth[:1] * 1.1, alpha[:1], vm[:1], K[:1], vm[:1], K[:1], depth[:1],
                        alpha[:1])
    assert not seen.any()


def test_missed_profile_and_added_past_stop_by_hand():
    truth = torch.tensor([1, 1, 1, 1, 1, 1, 1, 1, 0, 0], dtype=torch.bool)
    contribution = torch.tensor([5.0, 1, 7, 2, 8, 3, 6, 4, 9, 9])  # q1 = ids 1, 3
    hidden = torch.zeros(10, dtype=torch.bool)
    hidden[1] = True
    selected = truth.clone()
    selected[[1, 3, 4]] = False  # missed: both of q1 and the top one (id 4, q4)
    p = missed_profile(selected, truth, contribution, hidden)
    assert p["missed"] == 3
    assert [p[f"missed_q{q}"] for q in range(1, 5)] == pytest.approx([2 / 3, 0, 0, 1 / 3])
    assert p["missed_hidden"] == pytest.approx(1 / 3)
    base = torch.tensor([1, 0, 0, 0, 0], dtype=torch.bool)
    voda = torch.tensor([1, 1, 1, 1, 0], dtype=torch.bool)
    members = {"rendered": torch.tensor([1, 1, 0, 0, 0], dtype=torch.bool),
               "past_stop": torch.tensor([0, 1, 1, 0, 1], dtype=torch.bool)}
    a = added_past_stop(base, voda, members)
    assert a == {"added": 3, "added_past_stop": pytest.approx(2 / 3),
                 "added_past_stop_only": pytest.approx(1 / 3)}


def test_rendered_only_keeps_the_prefix_of_a_hand_list():
    c = _hand_contrib([0.6, 0.05, 0.3])
    c.n_render = torch.tensor([[2]], dtype=I32)
    r = rendered_only(c)
    assert r.ids.tolist() == [[[0, 1, -1]]] and r.counts.tolist() == [[2]]
    assert r.alphas[0, 0, 2] == 0 and c.past_stop.tolist() == [[[False, False, True]]]


def test_voda_before_the_freeze_is_the_ops_walk_and_gaps(shells):
    """The behaviour before the defaults were frozen (studies/voda/trained.py's [before] row):
    the op's contributor list and its chained-gap clusters, untouched."""
    *_, views = shells
    v = views[0]
    pix = _object_pixels(v)
    op = depth_contributors(v.meta, v.width, v.height, pix, 256, TAU_REL, TAU_ABS, TILE)
    old = voda_contributors(v, pix, VodaConfig(K_max=256, membership="walk", clustering="gap"))
    assert torch.equal(old.ids, op.ids) and torch.equal(old.clusters, op.clusters)
    new = voda_contributors(v, pix, VodaConfig(K_max=256))
    assert not torch.equal(new.clusters, op.clusters)
    assert torch.equal(new.ids, op.ids)
