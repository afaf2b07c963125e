"""The pinhole, ortho and fisheye (equidistant) camera models of the projection op (CPU).

1. ops.project against reference.project (float64 oracle, each lens written there on its own:
   fisheye's J by forward-mode differentiation of its map) in float64 and float32.
2. gradcheck of the op per model (float64), and its backward against autograd through the
   reference, with Gaussians on and near the optical axis (fisheye's series branch) and far off it.
3. A tiny Gaussian at a known 3D point lands at the pixel the lens maps that point to, through
   the whole renderer (alpha-weighted centroid of the rendered image).
4. A whole fisheye / ortho render against reference.render.
"""
from __future__ import annotations

import math

import pytest
import torch

import gsrender
from gsrender import ops
from gsrender import reference as ref

F64 = torch.float64
MODELS = ("pinhole", "ortho", "fisheye")
W, H = 64, 48
OUTS = ("means2d", "depths", "conics", "opacities2d")


def _camera(model: str, dtype=F64):
    """Two cameras looking down +z (one rotated about z and shifted), focal lengths that give a
    ~180° fisheye and a 2-unit-wide ortho view, an off-centre principal point."""
    f = {"pinhole": 40.0, "ortho": 30.0, "fisheye": 20.0}[model]
    Ks = torch.tensor([[f, 0.0, 33.0], [0.0, f * 1.1, 23.0], [0.0, 0.0, 1.0]], dtype=dtype)
    Ks = torch.stack([Ks, Ks])
    vms = torch.eye(4, dtype=dtype).repeat(2, 1, 1)
    a = 0.3
    vms[1, :3, :3] = torch.tensor([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0],
                                   [0.0, 0.0, 1.0]], dtype=dtype)
    vms[1, :3, 3] = torch.tensor([0.05, -0.03, 0.1], dtype=dtype)
    return vms, Ks


def _gaussians(model: str, n: int = 12, seed: int = 0, dtype=F64):
    """n Gaussians in front of the cameras: one on the optical axis, one a hair off it (fisheye's
    series branch), the rest up to ~70° off axis (pinhole/ortho: inside the view)."""
    g = torch.Generator().manual_seed(seed)
    z = 1.0 + 2.0 * torch.rand(n, generator=g, dtype=F64)
    spread = {"pinhole": 0.4, "ortho": 0.7, "fisheye": 2.5}[model]
    xy = (torch.rand(n, 2, generator=g, dtype=F64) - 0.5) * spread * (z[:, None] if model != "ortho" else 1)
    xy[0] = 0.0
    xy[1] = torch.tensor([1e-3, -2e-3], dtype=F64)
    means = torch.cat([xy, z[:, None]], dim=-1)
    quats = torch.randn(n, 4, generator=g, dtype=F64)
    scales = 0.03 + 0.08 * torch.rand(n, 3, generator=g, dtype=F64)
    opac = 0.3 + 0.6 * torch.rand(n, generator=g, dtype=F64)
    return [t.to(dtype) for t in (means, quats, scales, opac)]


def _ours(model, means, quats, scales, opac, vms, Ks, antialiased=False):
    return dict(zip(("radii",) + OUTS, ops.project(means, quats, scales, opac, vms, Ks, W, H, 0.3,
                                                   0.01, 1e10, 0.0, antialiased, model)))


def _theirs(model, means, quats, scales, opac, vms, Ks, antialiased=False):
    return ref.project(means, quats, scales, opac, vms, Ks, W, H, antialiased=antialiased,
                       camera_model=model)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("antialiased", [False, True])
def test_project_matches_reference_float64(model, antialiased):
    ins = _gaussians(model) + list(_camera(model))
    ours, want = _ours(model, *ins, antialiased), _theirs(model, *ins, antialiased)
    assert torch.equal(ours["radii"], want["radii"])
    assert (ours["radii"] > 0).all(-1).sum() >= 20  # (nearly) all visible in both cameras
    for k in OUTS:
        torch.testing.assert_close(ours[k], want[k], rtol=1e-10, atol=1e-10, msg=k)


@pytest.mark.parametrize("model", MODELS)
def test_project_float32_close_to_reference(model):
    ins = _gaussians(model) + list(_camera(model))
    ours = _ours(model, *[t.float() for t in ins])
    want = _theirs(model, *ins)
    vis = (ours["radii"] > 0).all(-1) & (want["radii"] > 0).all(-1)
    assert int(vis.sum()) >= 20
    # ceil() may round the other way when float32 errors straddle an integer: at most 1 px
    assert (ours["radii"][vis] - want["radii"][vis]).abs().max() <= 1
    torch.testing.assert_close(ours["means2d"][vis].double(), want["means2d"][vis], rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(ours["depths"][vis].double(), want["depths"][vis], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ours["conics"][vis].double(), want["conics"][vis], rtol=1e-4, atol=1e-6)


def test_fisheye_series_branch_is_continuous():
    """Points either side of the switch to the Taylor series (u = r²/z² = 0.04) give the same
    means2d and conics as the reference (which has no series) to float64 rounding."""
    z = torch.tensor([2.0, 2.0, 2.0, 2.0], dtype=F64)
    r = z * torch.tensor([0.2 - 1e-9, 0.2 + 1e-9, 1e-5, 0.0], dtype=F64)
    means = torch.stack([r * 0.6, r * 0.8, z], dim=-1)
    quats = torch.tensor([[1.0, 0.2, -0.3, 0.1]], dtype=F64).repeat(4, 1)
    scales = torch.tensor([[0.05, 0.1, 0.2]], dtype=F64).repeat(4, 1)
    opac = torch.full((4,), 0.8, dtype=F64)
    vms, Ks = _camera("fisheye")
    ours = _ours("fisheye", means, quats, scales, opac, vms[:1], Ks[:1])
    want = _theirs("fisheye", means, quats, scales, opac, vms[:1], Ks[:1])
    for k in OUTS:
        torch.testing.assert_close(ours[k], want[k], rtol=1e-10, atol=1e-10, msg=k)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("antialiased", [False, True])
def test_project_gradcheck(model, antialiased):
    means, quats, scales, opac = _gaussians(model, n=5, seed=1)
    vms, Ks = _camera(model)
    radii = _ours(model, means, quats, scales, opac, vms, Ks, antialiased)["radii"]
    assert (radii > 0).all()  # no culling decision within reach of the finite differences

    def f(means, quats, scales, opac, vms):
        out = ops.project(means, quats, scales, opac, vms, Ks, W, H, 0.3, 0.01, 1e10, 0.0,
                          antialiased, model)
        return out[1:]  # means2d, depths, conics, opacities2d

    ins = [t.clone().requires_grad_() for t in (means, quats, scales, opac, vms)]
    assert torch.autograd.gradcheck(f, ins, eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("model", MODELS)
def test_project_backward_matches_reference(model):
    means, quats, scales, opac = _gaussians(model, n=24, seed=2)
    vms, Ks = _camera(model)
    g = torch.Generator().manual_seed(3)
    weights = {k: None for k in OUTS}

    def loss(out):
        total = 0.0
        for k in OUTS:
            if weights[k] is None:
                weights[k] = torch.randn(out[k].shape, generator=g, dtype=F64)
            total = total + (weights[k] * out[k]).sum()
        return total

    ins = [t.clone().requires_grad_() for t in (means, quats, scales, opac, vms)]
    ours = torch.autograd.grad(loss(_ours(model, *ins, Ks, True)), ins)
    ins_ref = [t.clone().requires_grad_() for t in (means, quats, scales, opac, vms)]
    want = torch.autograd.grad(loss(_theirs(model, *ins_ref, Ks, True)), ins_ref)
    for name, a, b in zip(("means", "quats", "scales", "opacities", "viewmats"), ours, want):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-8, msg=name)


def _expected_pixel(model: str, p, Ks):
    """The lens map of camera-space point p, written out for this test."""
    fx, fy, cx, cy = float(Ks[0, 0]), float(Ks[1, 1]), float(Ks[0, 2]), float(Ks[1, 2])
    x, y, z = (float(v) for v in p)
    if model == "pinhole":
        return cx + fx * x / z, cy + fy * y / z
    if model == "ortho":
        return cx + fx * x, cy + fy * y
    r = math.hypot(x, y)
    theta = math.atan2(r, z)  # equidistant: image radius f·θ
    return cx + fx * theta * x / r, cy + fy * theta * y / r


# (camera-space point, model): off-centre points; the fisheye one 60° off axis
LANDING = {
    "pinhole": (0.5, -0.25, 2.0),
    "ortho": (0.5, -0.25, 2.0),
    "fisheye": (math.sin(math.pi / 3) * math.cos(2.5), math.sin(math.pi / 3) * math.sin(2.5),
                math.cos(math.pi / 3)),
}


@pytest.mark.parametrize("model", MODELS)
def test_tiny_gaussian_lands_on_the_lens_map(model):
    vms, Ks = _camera(model, torch.float32)
    vms, Ks = vms[:1], Ks[:1]
    p = torch.tensor([LANDING[model]], dtype=torch.float32)
    u, v = _expected_pixel(model, p[0], Ks[0])
    assert 5 < u < W - 5 and 5 < v < H - 5
    out = gsrender.rasterize(p, torch.tensor([[1.0, 0, 0, 0]]), torch.full((1, 3), 1e-4),
                             torch.tensor([0.9]), torch.ones(1, 3), vms, Ks, W, H,
                             camera_model=model)
    a = out.alphas[0, ..., 0].double()  # [H, W]
    ys, xs = torch.meshgrid(torch.arange(H, dtype=F64) + 0.5, torch.arange(W, dtype=F64) + 0.5,
                            indexing="ij")
    mass = a.sum()
    assert mass > 0.5  # a sub-pixel splat: eps2d's blur spreads it over a few pixels
    cu, cv = float((a * xs).sum() / mass), float((a * ys).sum() / mass)
    assert abs(cu - u) < 0.05 and abs(cv - v) < 0.05, (cu, cv, u, v)


@pytest.mark.parametrize("model", ["ortho", "fisheye"])
def test_render_matches_reference(model):
    """The whole renderer in float64 (no float32 ambiguity at the 1/255 cut) against
    reference.render, and its gradients against autograd through the reference."""
    means, quats, scales, opac = _gaussians(model, n=40, seed=4)
    scales = scales * 3  # overlapping splats: a real mix of covered and open pixels
    vms, Ks = _camera(model)
    colors = torch.rand(40, 3, generator=torch.Generator().manual_seed(5), dtype=F64)
    leaves = [t.clone().requires_grad_() for t in (means, quats, scales, opac, colors)]
    got = gsrender.rasterize(*leaves, vms, Ks, W, H, camera_model=model)
    leaves_ref = [t.clone().requires_grad_() for t in (means, quats, scales, opac, colors)]
    want = ref.render(*leaves_ref, vms, Ks, W, H, camera_model=model)
    assert 0.1 < float(want["alphas"].detach().mean()) < 0.95
    torch.testing.assert_close(got.colors, want["colors"], rtol=0, atol=1e-10)
    torch.testing.assert_close(got.alphas, want["alphas"], rtol=0, atol=1e-10)
    w = torch.rand(want["colors"].shape, generator=torch.Generator().manual_seed(6), dtype=F64)
    grads = torch.autograd.grad((got.colors * w).sum(), leaves)
    grads_ref = torch.autograd.grad((want["colors"] * w).sum(), leaves_ref)
    for name, a, b in zip(("means", "quats", "scales", "opacities", "colors"), grads, grads_ref):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9, msg=name)


def test_unknown_camera_model_is_rejected():
    ins = _gaussians("pinhole", n=2) + list(_camera("pinhole"))
    with pytest.raises(ValueError, match="camera_model"):
        ops.project(*ins, W, H, 0.3, 0.01, 1e10, 0.0, False, "ftheta")
    with pytest.raises(ValueError, match="camera_model"):
        torch.ops.gsrender.project_fwd(*ins, W, H, 0.3, 0.01, 1e10, 0.0, False, 3)
    with pytest.raises(ValueError, match="camera_model"):
        ref.project(*ins, W, H, camera_model="ftheta")
