"""Lens distortion through the unscented transform (gsrender/distortion.py, gsrender/unscented.py,
docs/cameras.md).

1. reference.distorted_pixels (OpenCV's formulas term by term) against OpenCV itself, and the
   implementation's lens maps against the reference (float64 and float32).
2. A tiny Gaussian at a known 3D point lands, through the whole renderer, at the pixel the
   distorted camera maps that point to.
3. With zero coefficients the unscented projection of tiny Gaussians is the EWA one (the
   projection op); for a linear lens (ortho) it is EWA for any size; for large Gaussians through
   a curved lens it is closer to the Monte-Carlo moments than EWA.
4. gradcheck through the unscented projection (float64), with quats + scales and with covars.
5. Culling at the lens's valid region, and bad arguments.

gsplat 1.5.3 has no pure-PyTorch unscented transform (its gsplat/cuda/_torch_impl*.py hold EWA
only), so there is nothing of gsplat's to compare it with without a GPU.
"""
from __future__ import annotations

import math

import pytest
import torch

import gsrender
from gsrender import distortion, projection
from gsrender import reference as ref

F32, F64 = torch.float32, torch.float64
W, H = 64, 48
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
DEVICES = ["cpu", pytest.param("cuda", marks=cuda)]
OUT_NAMES = ("radii", "means2d", "depths", "conics", "opacities2d")
# one set of coefficients per lens, moving pixels by a pixel or more away from the centre
COEFFS = {
    "pinhole": {"radial_coeffs": [0.25, -0.05, 0.01, 0.02, -0.01, 0.004],
                "tangential_coeffs": [2e-3, -3e-3], "thin_prism_coeffs": [3e-3, -1e-3, 2e-3, 5e-4]},
    "fisheye": {"radial_coeffs": [0.1, -0.01, 0.002, -4e-4]},
}
FOCAL = {"pinhole": 40.0, "fisheye": 20.0, "ortho": 30.0}


def _cameras(model: str, dtype=F64, device="cpu"):
    """Two cameras looking down +z (the second rotated about z and shifted), an off-centre
    principal point; a fisheye of about 180°."""
    f = FOCAL[model]
    K = torch.tensor([[f, 0.0, 33.0], [0.0, f * 1.1, 23.0], [0.0, 0.0, 1.0]], dtype=dtype)
    vms = torch.eye(4, dtype=dtype).repeat(2, 1, 1)
    a = 0.3
    vms[1, :3, :3] = torch.tensor([[math.cos(a), -math.sin(a), 0.0],
                                   [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]], dtype=dtype)
    vms[1, :3, 3] = torch.tensor([0.05, -0.03, 0.1], dtype=dtype)
    return vms.to(device), torch.stack([K, K]).to(device)


def _coeffs(model: str, C: int, dtype=F64, device="cpu", scale: float = 1.0) -> dict:
    return {name: (scale * torch.tensor(v, dtype=dtype, device=device)).expand(C, len(v)).contiguous()
            for name, v in COEFFS.get(model, {}).items()}


def _points(model: str, n: int, seed: int) -> torch.Tensor:
    """Camera-space points over the lens's view: pinhole up to |x/z|, |y/z| ≤ 0.75, fisheye up
    to 80° from the axis, depths 0.5..5 [n,3] float64."""
    g = torch.Generator().manual_seed(seed)
    z = 0.5 + 4.5 * torch.rand(n, generator=g, dtype=F64)
    if model == "fisheye":
        theta = math.radians(80) * torch.rand(n, generator=g, dtype=F64).sqrt()
        phi = 2 * math.pi * torch.rand(n, generator=g, dtype=F64)
        d = torch.stack([theta.sin() * phi.cos(), theta.sin() * phi.sin(), theta.cos()], -1)
        return d * (z / d[:, 2])[:, None]
    xy = 1.5 * torch.rand(n, 2, generator=g, dtype=F64) - 0.75
    return torch.cat([xy * z[:, None], z[:, None]], -1)


# ------------------------------------------------------------------------- 1. the lens maps


@pytest.mark.parametrize("model", ["pinhole", "fisheye"])
def test_reference_matches_opencv(model):
    cv2 = pytest.importorskip("cv2")
    import numpy as np
    p = _points(model, 200, seed=1)
    K = _cameras(model)[1][0]
    c = COEFFS[model]
    got = ref.distorted_pixels(model, p, K, c.get("radial_coeffs"), c.get("tangential_coeffs"),
                               c.get("thin_prism_coeffs"))
    zero3 = np.zeros(3)
    if model == "pinhole":
        k = c["radial_coeffs"]
        dist = np.array([k[0], k[1], *c["tangential_coeffs"], k[2], k[3], k[4], k[5],
                         *c["thin_prism_coeffs"]])
        want, _ = cv2.projectPoints(p.numpy(), zero3, zero3, K.numpy(), dist)
    else:
        want, _ = cv2.fisheye.projectPoints(p.numpy()[None], zero3, zero3, K.numpy(),
                                            np.array(c["radial_coeffs"]))
    torch.testing.assert_close(got, torch.from_numpy(want.reshape(-1, 2)), atol=1e-9, rtol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,atol", [(F64, 1e-9), (F32, 2e-4)])
@pytest.mark.parametrize("model", ["pinhole", "fisheye"])
def test_lens_map_matches_reference(model, dtype, atol, device):
    _, Ks = _cameras(model, dtype, device)
    coeffs = _coeffs(model, 2, dtype, device)
    lens = distortion.lens(model, Ks, W, H, **coeffs)
    p = _points(model, 300, seed=2)
    pix, valid = distortion.image_points(lens, p.to(dtype=dtype, device=device).expand(2, -1, -1))
    assert bool(valid.all())
    c = COEFFS[model]
    for cam in range(2):
        want = ref.distorted_pixels(model, p, Ks[cam].double().cpu(), c.get("radial_coeffs"),
                                    c.get("tangential_coeffs"), c.get("thin_prism_coeffs"))
        torch.testing.assert_close(pix[cam].double().cpu(), want, atol=atol, rtol=0)


def test_fisheye_valid_region_ends_where_the_map_folds():
    """k1 < 0 makes θ_d(θ) = θ(1 + k1θ²) peak at θ = 1/√(−3k1): points past it are invalid."""
    _, Ks = _cameras("fisheye")
    k1 = -0.2
    lens = distortion.lens("fisheye", Ks, W, H, radial_coeffs=torch.tensor([[k1, 0, 0, 0]] * 2,
                                                                        dtype=F64))
    fold = 1 / math.sqrt(-3 * k1)
    torch.testing.assert_close(lens.max_angle, torch.full((2,), fold, dtype=F64))
    theta = torch.tensor([fold - 1e-3, fold + 1e-3], dtype=F64)
    p = torch.stack([theta.sin(), torch.zeros(2, dtype=F64), theta.cos()], -1)
    _, valid = distortion.image_points(lens, p.expand(2, -1, -1))
    assert valid[:, 0].all() and not valid[:, 1].any()


# ---------------------------------------------------------------- 2. landing on the lens map


# a point in the first camera's view where the distortion moves its pixel by several pixels
LANDING = {"pinhole": (0.55, -0.4, 1.2), "fisheye": (1.1, 0.6, 0.7)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", ["pinhole", "fisheye"])
def test_tiny_gaussian_lands_at_the_distorted_pixel(model, device):
    vms, Ks = _cameras(model, F32, device)
    vms, Ks = vms[:1], Ks[:1]
    coeffs = _coeffs(model, 1, F32, device)
    p = torch.tensor([LANDING[model]], dtype=F64)
    c = COEFFS[model]
    u, v = ref.distorted_pixels(model, p, Ks[0].double().cpu(), c.get("radial_coeffs"),
                                c.get("tangential_coeffs"), c.get("thin_prism_coeffs"))[0].tolist()
    u0, v0 = ref.distorted_pixels(model, p, Ks[0].double().cpu())[0].tolist()
    assert 5 < u < W - 5 and 5 < v < H - 5
    assert math.hypot(u - u0, v - v0) > 1  # the coefficients move it (20× the tolerance)
    one = {"dtype": F32, "device": device}
    out = gsrender.rasterize(p.to(**one), torch.tensor([[1.0, 0, 0, 0]], **one),
                             torch.full((1, 3), 1e-4, **one), torch.tensor([0.9], **one),
                             torch.ones(1, 3, **one), vms, Ks, W, H, camera_model=model,
                             with_ut=True, **coeffs)
    torch.testing.assert_close(out.meta["means2d"][0, 0].double().cpu(),
                               torch.tensor([u, v], dtype=F64), atol=1e-3, rtol=0)
    a = out.alphas[0, ..., 0].double().cpu()  # [H, W]
    ys, xs = torch.meshgrid(torch.arange(H, dtype=F64) + 0.5, torch.arange(W, dtype=F64) + 0.5,
                            indexing="ij")
    mass = a.sum()
    assert mass > 0.5
    cu, cv = float((a * xs).sum() / mass), float((a * ys).sum() / mass)
    assert abs(cu - u) < 0.05 and abs(cv - v) < 0.05, (cu, cv, u, v)


# ---------------------------------------------------------------- 3. UT against EWA and MC


def _gaussians(model: str, n: int, seed: int, scale: float, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    means = _points(model, n, seed).to(dtype)
    quats = torch.randn(n, 4, generator=g, dtype=F64).to(dtype)
    scales = (scale * (0.5 + torch.rand(n, 3, generator=g, dtype=F64))).to(dtype)
    opac = (0.2 + 0.7 * torch.rand(n, generator=g, dtype=F64)).to(dtype)
    return means, quats, scales, opac


def _project(model, means, quats, scales, opac, vms, Ks, antialiased=True, **kw):
    return dict(zip(OUT_NAMES, projection.project(
        means, quats, scales, opac, vms, Ks, W, H, 0.3, 0.01, 1e10, 0.0, antialiased, model,
        **kw), strict=True))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", ["pinhole", "fisheye", "ortho"])
def test_ut_of_tiny_gaussians_is_ewa(model, device):
    """Gaussians a few thousandths of a unit wide (under a pixel): the lens is linear across them,
    so UT and EWA agree to float32 rounding; the projection op gives EWA. (Not antialiased: the
    compensation of Gaussians this small would cull most of them.)"""
    vms, Ks = _cameras(model, F32, device)
    g = [t.to(device) for t in _gaussians(model, 200, seed=3, scale=2e-3, dtype=F32)]
    ewa = _project(model, *g, vms, Ks, antialiased=False)
    ut = _project(model, *g, vms, Ks, antialiased=False, with_ut=True)
    vis = (ewa["radii"] > 0).all(-1)
    assert int(vis.sum()) > 50
    assert torch.equal(ewa["radii"], ut["radii"])
    torch.testing.assert_close(ut["means2d"], ewa["means2d"], atol=2e-3, rtol=0)
    torch.testing.assert_close(ut["depths"], ewa["depths"])
    torch.testing.assert_close(ut["conics"], ewa["conics"], atol=1e-5, rtol=2e-4)
    torch.testing.assert_close(ut["opacities2d"], ewa["opacities2d"], atol=1e-5, rtol=2e-4)


def test_ut_is_exact_for_the_linear_lens():
    """ortho is linear: the sigma points' moments are the exact ones, whatever the size."""
    vms, Ks = _cameras("ortho")
    g = _gaussians("ortho", 50, seed=4, scale=0.3)
    ewa = ref.project(*g, vms, Ks, W, H, antialiased=True, camera_model="ortho")
    ut = _project("ortho", *g, vms, Ks, with_ut=True)
    assert int((ewa["radii"] > 0).all(-1).sum()) > 20
    for name in OUT_NAMES:
        torch.testing.assert_close(ut[name], ewa[name], atol=1e-10, rtol=1e-10)


def _monte_carlo_moments(model, means, covars, vms, Ks, coeffs, n=200_000, seed=5):
    """The pixels' mean [C,N,2] and covariance [C,N,2,2] of n samples of each Gaussian."""
    g = torch.Generator().manual_seed(seed)
    L = torch.linalg.cholesky(covars)
    x = means[:, None] + torch.einsum("nij,nsj->nsi", L, torch.randn(means.shape[0], n, 3,
                                                                      generator=g, dtype=F64))
    p = torch.einsum("cij,nsj->cnsi", vms[:, :3, :3], x) + vms[:, None, None, :3, 3]
    pix, _ = distortion.image_points(distortion.lens(model, Ks, W, H, **coeffs), p)
    mu = pix.mean(2)
    e = pix - mu[:, :, None]
    return mu, torch.einsum("cnsi,cnsj->cnij", e, e) / n


@pytest.mark.parametrize("model", ["pinhole", "fisheye"])
def test_ut_of_large_gaussians_is_closer_to_monte_carlo_than_ewa(model):
    """Gaussians a tenth of their distance wide, through the lens without coefficients (EWA's
    case): EWA's tangent map misses the curvature that shifts their images; the sigma points
    see it. Both against the moments of 200k samples (Monte-Carlo noise: ~0.3% of a
    covariance, hundredths of a pixel in a mean)."""
    vms, Ks = _cameras(model)
    means = torch.tensor([[0.5, 0.3, 1.5], [-0.6, 0.2, 1.2], [0.1, -0.5, 1.0]], dtype=F64)
    if model == "fisheye":
        means = torch.tensor([[1.2, 0.5, 0.8], [-1.5, 0.3, 0.6], [0.2, -1.0, 0.7]], dtype=F64)
    quats = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * 3, dtype=F64)
    scales = torch.full((3, 3), 0.12, dtype=F64)
    opac = torch.full((3,), 0.9, dtype=F64)
    vms, Ks = vms[:1], Ks[:1]
    mu, cov = _monte_carlo_moments(model, means, ref.covariances(quats, scales), vms, Ks, {})
    errs = {}
    for name, kw in (("ewa", {}), ("ut", {"with_ut": True})):
        # eps2d = 0: the fitted covariance itself
        out = dict(zip(OUT_NAMES, projection.project(means, quats, scales, opac, vms, Ks, W, H,
                                                     0.0, 0.01, 1e10, 0.0, False, model, **kw),
                       strict=True))
        assert bool((out["radii"] > 0).all())
        a, b, c = out["conics"].unbind(-1)
        det = a * c - b * b
        cov2d = torch.stack([torch.stack([c, -b], -1), torch.stack([-b, a], -1)], -2) / det[..., None, None]
        errs[name] = (float((out["means2d"] - mu).norm(dim=-1).max()),
                      float(((cov2d - cov).norm(dim=(-2, -1)) / cov.norm(dim=(-2, -1))).max()))
    assert errs["ut"][0] < 0.5 * errs["ewa"][0], errs  # mean error (px)
    # with 3DGUT's α = 0.1 the sigma points sit 0.17σ from the mean: the covariance gains little
    assert errs["ut"][1] < errs["ewa"][1], errs  # relative covariance error


# -------------------------------------------------------------------------------- 4. gradients


@pytest.mark.parametrize("model", ["pinhole", "fisheye"])
@pytest.mark.parametrize("use_covars", [False, True])
def test_gradcheck_through_the_unscented_projection(model, use_covars):
    """Float64 gradcheck of every float output w.r.t. means, quats + scales or covars,
    opacities, viewmats and the distortion coefficients (antialiased: the compensation too)."""
    vms, Ks = _cameras(model)
    means, quats, scales, opac = _gaussians(model, 6, seed=6, scale=0.05)
    coeffs = _coeffs(model, 2)
    names = list(coeffs)
    covars = ref.covariances(quats, scales)
    out0 = _project(model, means, quats, scales, opac, vms, Ks, with_ut=True, **coeffs)
    assert int((out0["radii"] > 0).all(-1).sum()) >= 4

    def fn(means, a, b, opac, vms, *cs):
        kw = dict(zip(names, cs, strict=True))
        if use_covars:
            out = _project(model, means, None, None, opac, vms, Ks, with_ut=True,
                           covars=(a + a.transpose(-1, -2)) / 2, **kw)
        else:
            out = _project(model, means, a, b, opac, vms, Ks, with_ut=True, **kw)
        return tuple(out[k] for k in OUT_NAMES[1:])

    firsts = (covars, covars) if use_covars else (quats, scales)
    inputs = [t.clone().requires_grad_() for t in (means, *firsts, opac, vms, *coeffs.values())]
    if use_covars:
        inputs[2].requires_grad_(False)
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-5)


# ----------------------------------------------------------------- 5. culling and bad input


def test_sigma_point_past_the_pinhole_fold_culls_the_gaussian():
    """k1 = −0.3: icD = 1 − 0.3r² falls to 0.8 at r² = 2/3. A Gaussian whose mean is inside but
    one sigma point is past it is culled; the same Gaussian made small is kept."""
    vms, Ks = _cameras("pinhole")
    vms, Ks = vms[:1], Ks[:1].clone()
    Ks[:, :2, :2] = 10.0  # a wide view: r² = 2/3 is well inside the image
    coeffs = {"radial_coeffs": torch.tensor([[-0.3, 0, 0, 0, 0, 0]], dtype=F64)}
    r = math.sqrt(2 / 3) - 0.02
    means = torch.tensor([[r, 0.0, 1.0]], dtype=F64)
    quats = torch.tensor([[1.0, 0, 0, 0]], dtype=F64)
    opac = torch.tensor([0.9], dtype=F64)
    for s, kept in ((0.3, False), (0.01, True)):
        out = _project("pinhole", means, quats, torch.full((1, 3), s, dtype=F64), opac, vms, Ks,
                       with_ut=True, **coeffs)
        assert bool((out["radii"] > 0).all()) == kept, s


def test_sigma_point_behind_the_camera_culls_the_gaussian():
    vms, Ks = _cameras("fisheye")
    means = torch.tensor([[0.0, 0.0, 0.5]], dtype=F64)
    quats = torch.tensor([[1.0, 0, 0, 0]], dtype=F64)
    opac = torch.tensor([0.9], dtype=F64)
    for s, kept in ((4.0, False), (0.5, True)):  # sigma points at z = 0.5 ∓ 0.17·s
        out = _project("fisheye", means, quats, torch.full((1, 3), s, dtype=F64), opac, vms, Ks,
                       with_ut=True)
        assert bool((out["radii"] > 0).all()) == kept, s


def _scene_args(model="pinhole"):
    vms, Ks = _cameras(model, F32)
    means, quats, scales, opac = _gaussians(model, 4, seed=7, scale=0.05, dtype=F32)
    return means, quats, scales, opac, torch.ones(4, 3), vms, Ks, W, H


@pytest.mark.parametrize("name,width", [("radial_coeffs", 6), ("tangential_coeffs", 2),
                                        ("thin_prism_coeffs", 4)])
def test_coefficients_need_with_ut(name, width):
    with pytest.raises(ValueError, match=f"{name}: lens distortion .* pass with_ut=True"):
        gsrender.rasterize(*_scene_args(), **{name: torch.zeros(2, width)})


@pytest.mark.parametrize("model,kw,match", [
    ("pinhole", {"radial_coeffs": torch.zeros(2, 4)}, r"radial_coeffs must have shape \[2, 6\]"),
    ("fisheye", {"radial_coeffs": torch.zeros(2, 6)}, r"radial_coeffs must have shape \[2, 4\]"),
    ("fisheye", {"tangential_coeffs": torch.zeros(2, 2)}, "tangential_coeffs: camera_model='fisheye'"),
    ("ortho", {"radial_coeffs": torch.zeros(2, 6)}, "radial_coeffs: camera_model='ortho'"),
    ("pinhole", {"radial_coeffs": torch.zeros(2, 6, dtype=F64)}, "radial_coeffs must have dtype"),
])
def test_bad_coefficients(model, kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        gsrender.rasterize(*_scene_args(model), camera_model=model, with_ut=True, **kw)


def test_bad_covars():
    means, quats, scales, opac, colors, vms, Ks, w, h = _scene_args()
    cov = ref.covariances(quats, scales)
    with pytest.raises(ValueError, match="covars replaces quats and scales"):
        gsrender.rasterize(means, quats, scales, opac, colors, vms, Ks, w, h, covars=cov)
    with pytest.raises(ValueError, match=r"covars must have shape \[4, 3, 3\]"):
        gsrender.rasterize(means, None, None, opac, colors, vms, Ks, w, h, covars=cov[:, :2])
    bad = cov.clone()
    bad[2] = -bad[2]
    with pytest.raises(ValueError, match=r"covars\[2\] is not"):
        gsrender.rasterize(means, None, None, opac, colors, vms, Ks, w, h, covars=bad, with_ut=True)
    with pytest.raises(TypeError, match="with_ut must be a bool"):
        gsrender.rasterize(means, quats, scales, opac, colors, vms, Ks, w, h, with_ut=1)
