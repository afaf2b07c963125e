"""SplitGS-Loc MoG split: the libraries' moment conditions, that split mixtures keep each
parent's mean and covariance (to 1e-6), with footprint-driven recursion, and that the peak
opacity rule keeps a split Gaussian's rendered peak α where the density rule loses it."""
from __future__ import annotations

import math

import pytest
import torch

from gsrender.loc import split as S
from gsrender.reference import covariances
from gsrender.scene import GaussianModel

F64 = torch.float64


@pytest.mark.parametrize("k", [2, 3, 4])
def test_library_moments(k):
    w, m, s = S.mog_library(k)
    assert abs(float(w.sum()) - 1) < 1e-12
    assert abs(float((w * m).sum())) < 1e-12
    assert abs(float((w * (s * s + m * m)).sum()) - 1) < 1e-12
    assert (w > 0).all() and (s > 0).all()


def test_library_k2_closed_form_and_lloyd_max_thresholds():
    _, m, s = S.mog_library(2)
    assert torch.allclose(m.abs(), torch.full((2,), math.sqrt(2 / math.pi), dtype=F64), atol=1e-12)
    assert torch.allclose(s, torch.full((2,), math.sqrt(1 - 2 / math.pi), dtype=F64), atol=1e-12)
    # the textbook Lloyd–Max quantisers of N(0,1)
    assert S.lloyd_max_thresholds(3)[1] == pytest.approx(0.6120, abs=1e-4)
    assert S.lloyd_max_thresholds(4)[2] == pytest.approx(0.9816, abs=1e-4)
    with pytest.raises(ValueError, match="k"):
        S.mog_library(5)


def _model(n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return GaussianModel(
        means=torch.randn(n, 3, generator=g, dtype=F64), quats=torch.randn(n, 4, generator=g, dtype=F64),
        scales=0.05 + torch.rand(n, 3, generator=g, dtype=F64),
        opacities=0.2 + 0.6 * torch.rand(n, generator=g, dtype=F64), sh=torch.zeros(n, 1, 3, dtype=F64))


def _check_moments(parent_model, child_model, parent):
    """Each parent's children, as a mixture with weights ∝ opacity·|Σ|^{1/2} (the density rule),
    reproduce the parent's mean and covariance."""
    covs = covariances(child_model.quats, child_model.scales)
    vol = child_model.opacities * child_model.scales.prod(1)  # ∝ each child's density mass
    pcov = covariances(parent_model.quats, parent_model.scales)
    for i in range(parent_model.num_gaussians):
        sel = parent == i
        w = vol[sel] / vol[sel].sum()
        mu, cov = S.mixture_moments(child_model.means[sel], covs[sel], w)
        assert torch.allclose(mu, parent_model.means[i], atol=1e-6)
        assert torch.allclose(cov, pcov[i], atol=1e-6)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_split_one_axis_keeps_moments(k):
    model = _model()
    mask = torch.tensor([True, False, True, True, False, True])
    out, parent = S.split_axis(model, mask, axis=1, k=k, max_opacity=1e9)
    assert out.num_gaussians == 2 + 4 * k
    _check_moments(model, out, parent)
    # unsplit Gaussians are untouched
    assert torch.equal(out.means[:2], model.means[[1, 4]])


def test_product_over_axes_keeps_moments():
    model = _model()
    out, parent = model, torch.arange(6)
    for axis, k in ((0, 2), (1, 3), (2, 4)):
        # the density rule: children of one parent share relative weights on every axis
        out, p = S.split_axis(out, torch.ones(out.num_gaussians, dtype=torch.bool), axis, k,
                              max_opacity=1e9, opacity_rule="density")
        parent = parent[p]
    assert out.num_gaussians == 6 * 24
    _check_moments(model, out, parent)


def test_density_opacity_rule_and_cap():
    model = _model()
    out, parent = S.split_axis(model, torch.ones(6, dtype=torch.bool), 0, 2, opacity_rule="density")
    w, _, s = S.mog_library(2)
    want = (model.opacities[parent] * float(w[0] / s[0])).clamp_max(S.MAX_OPACITY)
    assert torch.allclose(out.opacities, want)


def test_footprint_driven_recursive_split():
    from gsrender.synthetic import intrinsics, look_at
    # one big Gaussian (long along x) and one tiny one, 4 m in front of a 64×48 camera
    model = GaussianModel(
        means=torch.tensor([[0.0, 0.0, 0.0], [0.3, 0.1, 0.0]], dtype=F64),
        quats=torch.tensor([[1.0, 0, 0, 0], [1.0, 0, 0, 0]], dtype=F64),
        scales=torch.tensor([[0.5, 0.02, 0.002], [0.003, 0.003, 0.003]], dtype=F64),
        opacities=torch.tensor([0.9, 0.9], dtype=F64), sh=torch.zeros(2, 1, 3, dtype=F64))
    vm = look_at([0.0, -4.0, 0.0], [0.0, 0.0, 0.0])[None].double()
    K = intrinsics(64, 48, 60.0)[None].double()
    fp = S.axis_footprints(model.means, model.quats, model.scales, vm, K, 64, 48)
    assert fp[0, 0] > 2 and fp[0, 2] < 2 and (fp[1] < 2).all()
    out, parent = S.split_gaussians(model, vm, K, 64, 48, rho_max=2.0, levels=3,
                                    opacity_rule="density")
    assert (parent == 1).sum() == 1  # the tiny one is never split
    assert (parent == 0).sum() >= 4  # split on x at least twice
    fp2 = S.axis_footprints(out.means, out.quats, out.scales, vm, K, 64, 48)
    assert fp2[parent == 0, 0].max() < fp[0, 0] / 2
    _check_moments(model, GaussianModel(out.means, out.quats, out.scales,
                                        out.opacities / out.opacities.max(), out.sh), parent)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_peak_gain_reaches_parent_peak_on_axis(k):
    w, _, sig = S.mog_library(k)
    o = torch.tensor([0.05, 0.3, 0.6, 0.9], dtype=F64)
    o_k = o[:, None] * S.peak_gain(o, k)[:, None] * (w / sig)[None]
    peak = S.composite_profile(o_k, k).amax(1)
    assert torch.allclose(peak, o, atol=2e-3)
    dens = S.composite_profile(o[:, None] * (w / sig)[None], k).amax(1)
    assert ((dens - o).abs() > 0.05 * o).all()  # the density rule misses it


def _render_alpha(model):
    import gsrender
    from gsrender.synthetic import intrinsics, look_at

    vm = look_at([0.0, -3.0, 0.0], [0.0, 0.0, 0.0])[None]
    K = intrinsics(96, 96, 60.0)[None]
    m = model.to(torch.float32)
    with torch.no_grad():
        out = gsrender.rasterize(m.means, m.quats, m.scales, m.opacities, m.sh, vm, K, 96, 96,
                                 sh_degree=0)
    return out.alphas[0, ..., 0]


@pytest.mark.parametrize("opacity", [0.99, 0.6])
def test_rendered_composite_peak_after_two_axis_split(opacity):
    """A flat Gaussian facing the camera (1σ ≈ 10 px on x and z) split on both image-plane axes:
    under the peak rule the children's rendered α-composite keeps the parent's peak α (float32
    renderer, 0.03) and its coverage within [1, 1.45]×; the density rule's peak falls to ~0.7×."""
    parent = GaussianModel(means=torch.zeros(1, 3, dtype=F64),
                           quats=torch.tensor([[1.0, 0, 0, 0]], dtype=F64),
                           scales=torch.tensor([[0.25, 0.002, 0.2]], dtype=F64),
                           opacities=torch.tensor([opacity], dtype=F64),
                           sh=torch.zeros(1, 1, 3, dtype=F64))
    a_parent = _render_alpha(parent)
    peaks = {}
    for rule in ("peak", "density"):
        out = parent
        for axis in (0, 2):
            out, _ = S.split_axis(out, torch.ones(out.num_gaussians, dtype=torch.bool), axis, 2,
                                  opacity_rule=rule)
        assert out.num_gaussians == 4
        a = _render_alpha(out)
        peaks[rule] = float(a.max())
        if rule == "peak":
            assert abs(float(a.max()) - float(a_parent.max())) < 0.03
            assert 1.0 <= float(a.sum() / a_parent.sum()) <= 1.45
    assert peaks["density"] < 0.8 * float(a_parent.max())


def _oblique_view(width=96, height=72):
    from gsrender.synthetic import intrinsics, look_at

    vm = look_at([-2.5, -2.5, 2.5], [0.0, 0.0, 0.0])[None].double()
    return vm, intrinsics(width, height, 60.0)[None].double()


def test_thinnest_axis_is_never_split_unless_asked():
    """A Gaussian whose three axes all cover > 2 px: by default its thin axis (z) keeps its scale
    in every child, over three levels (though the long axes' children become thinner than it);
    with split_normal the thin axis is split too."""
    model = GaussianModel(means=torch.zeros(1, 3, dtype=F64),
                          quats=torch.tensor([[1.0, 0, 0, 0]], dtype=F64),
                          scales=torch.tensor([[0.5, 0.3, 0.2]], dtype=F64),
                          opacities=torch.tensor([0.9], dtype=F64), sh=torch.zeros(1, 1, 3, dtype=F64))
    vm, K = _oblique_view()
    assert (S.axis_footprints(model.means, model.quats, model.scales, vm, K, 96, 72) > 2).all()
    out, _ = S.split_gaussians(model, vm, K, 96, 72, rho_max=2.0, levels=3)
    assert out.num_gaussians >= 8
    assert torch.equal(out.scales[:, 2], torch.full((out.num_gaussians,), 0.2, dtype=F64))
    assert (out.scales[:, 0] < 0.2).any()  # a long axis got thinner than the normal
    both, _ = S.split_gaussians(model, vm, K, 96, 72, rho_max=2.0, levels=3, split_normal=True)
    assert (both.scales[:, 2] < 0.2).all() and both.num_gaussians > out.num_gaussians


def _fit_error(o, gain, k):
    """Squared error of the children's α-composite against the parent's α over ±3σ on and
    across the split axis (an independent evaluation of the image rule's objective)."""
    w, m, sig = S.mog_library(k)
    x = torch.linspace(-3, 3, 241, dtype=F64)
    h = torch.exp(-0.5 * torch.linspace(-3, 3, 41, dtype=F64) ** 2)
    g_k = torch.exp(-0.5 * ((x[None] - m[:, None]) / sig[:, None]) ** 2)  # [K,X]
    o_k = (o * gain * w / sig).clamp_max(S.MAX_OPACITY)
    comp = 1 - torch.prod(1 - o_k[:, None, None] * h[None, :, None] * g_k[:, None, :], 0)
    return float(((comp - o * h[:, None] * torch.exp(-0.5 * x[None] ** 2)) ** 2).sum())


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("o", [0.1, 0.5, 0.9, 0.99])
def test_image_rule_is_the_least_squares_gain(k, o):
    """The image rule's gain fits the parent's α better than the density and peak rules' gains
    and than gains 3 % off it."""
    ot = torch.tensor([o], dtype=F64)
    c = float(S.child_gain("image", ot, k)[0])
    e = _fit_error(o, c, k)
    for other in (1.0, float(S.peak_gain(ot, k)[0]), 0.97 * c, 1.03 * c):
        assert e <= _fit_error(o, other, k) + 1e-12
