"""Raw ops project_fwd/project_bwd and sh_fwd/sh_bwd (CPU; CUDA when a GPU is present).

The oracle is gsrender.reference (float64): forwards are compared directly, backwards against
torch.autograd through the reference. A hand-computed case and finite-difference gradchecks of
the op pairs do not depend on the reference.
"""
from __future__ import annotations

import math

import pytest
import torch

from gsrender import _C  # noqa: F401  (registers torch.ops.gsrender.*)
from gsrender import reference as ref
from tests.conftest import every_cpu_isa

OPS = torch.ops.gsrender
W, H = 64, 48
EPS2D, NEAR, FAR = 0.3, 0.01, 1e10
OUT_NAMES = ("radii", "means2d", "depths", "conics", "opacities2d")
GRAD_NAMES = ("means", "quats", "scales", "opacities", "viewmats")

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


# ------------------------------------------------------------------------------------ scenes


def _rotation(g: torch.Generator, dtype, angle: float) -> torch.Tensor:
    a = angle * torch.randn(3, generator=g, dtype=dtype)
    zero = torch.zeros((), dtype=dtype)
    skew = torch.stack([torch.stack([zero, -a[2], a[1]]), torch.stack([a[2], zero, -a[0]]),
                        torch.stack([-a[1], a[0], zero])])
    return torch.linalg.matrix_exp(skew)


def make_cameras(g: torch.Generator, C: int, dtype=torch.float64):
    """C cameras near (0, 0, −4) looking down +z at the origin; viewmats [C,4,4], Ks [C,3,3]."""
    viewmats = torch.zeros(C, 4, 4, dtype=dtype)
    Ks = torch.zeros(C, 3, 3, dtype=dtype)
    for c in range(C):
        viewmats[c, :3, :3] = _rotation(g, dtype, 0.1)
        viewmats[c, :3, 3] = torch.tensor([0.0, 0.0, 4.0], dtype=dtype) + 0.2 * torch.randn(
            3, generator=g, dtype=dtype)
        viewmats[c, 3, 3] = 1
        f = 50 + 20 * torch.rand(2, generator=g, dtype=dtype)
        pp = torch.tensor([W / 2, H / 2], dtype=dtype) + 3 * torch.randn(2, generator=g,
                                                                           dtype=dtype)
        Ks[c] = torch.tensor([[f[0], 0, pp[0]], [0, f[1], pp[1]], [0, 0, 1]], dtype=dtype)
    return viewmats, Ks


def make_scene(seed: int = 0, N: int = 400, C: int = 3, dtype=torch.float64, hard: bool = True):
    """Random Gaussians in front of the cameras; with hard=True, every tenth of them is a
    special case: behind the camera / before the near plane, far off-screen, just outside the
    Jacobian's clamp limits but large enough to be visible, huge, tiny, flat (degenerate), and
    opacity below or near 1/255."""
    g = torch.Generator().manual_seed(seed)

    def rand(*s):
        return torch.rand(*s, generator=g, dtype=dtype)

    def randn(*s):
        return torch.randn(*s, generator=g, dtype=dtype)

    viewmats, Ks = make_cameras(g, C, dtype)
    means = randn(N, 3) * torch.tensor([1.5, 1.2, 1.5], dtype=dtype)
    quats = randn(N, 4)
    scales = torch.exp(randn(N, 3) * 0.5 - 2.5)
    opacities = 0.02 + 0.97 * rand(N)
    if hard:
        k = N // 10
        means[0:k, 2] = -4.0 - rand(k)  # behind the cameras
        means[k:k + 5, 2] = -4.0 + 0.005 * rand(5)  # between the camera and the near plane
        means[2 * k:3 * k, 0] = 40.0 + rand(k)  # far off-screen
        # outside the clamp limit of x/z (and some of y/z), visible through their size
        means[3 * k:4 * k, 0] = 3.5 * torch.sign(randn(k))
        means[3 * k:4 * k, 1] = 2.8 * torch.sign(randn(k)) * (rand(k) > 0.5)
        means[3 * k:4 * k, 2] = 0.5 * randn(k)
        scales[3 * k:4 * k] = 0.6 + 0.3 * rand(k, 3)
        scales[4 * k:4 * k + k // 2] = 5.0 + 5 * rand(k // 2, 3)  # huge
        scales[4 * k + k // 2:5 * k] = 1e-5 + 1e-4 * rand(k - k // 2, 3)  # tiny
        scales[5 * k:6 * k, 0] = 1e-6  # flat
        opacities[6 * k:6 * k + k // 2] = 0.002  # below 1/255: culled
        opacities[6 * k + k // 2:7 * k] = 0.0045 + 0.01 * rand(k - k // 2)
    return means, quats, scales, opacities, viewmats, Ks


def project_op(scene, antialiased: bool, radius_clip: float = 0.0):
    return OPS.project_fwd(*scene, W, H, EPS2D, NEAR, FAR, radius_clip, antialiased)


def project_ref(scene, antialiased: bool, radius_clip: float = 0.0):
    out = ref.project(*scene, W, H, eps2d=EPS2D, near_plane=NEAR, far_plane=FAR,
                      radius_clip=radius_clip, antialiased=antialiased)
    return [out[k] for k in OUT_NAMES]


def rowwise_rel_err(a: torch.Tensor, b: torch.Tensor, rows: int) -> float:
    """max |a−b| / max|b| per leading-`rows`-dims row (a Gaussian's components share a scale),
    floored so exact zeros compare absolutely against 1e-12 of the whole tensor's scale."""
    a, b = a.double().reshape(*b.shape[:rows], -1), b.double().reshape(*b.shape[:rows], -1)
    scale = b.abs().amax(-1).clamp_min(1e-12 * b.abs().max().item() + 1e-300)
    return ((a - b).abs().amax(-1) / scale).max().item()


# -------------------------------------------------------------------------- projection fwd


@pytest.mark.parametrize("antialiased", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_project_fwd_matches_reference_float64(seed, antialiased):
    scene = make_scene(seed)
    got, want = project_op(scene, antialiased), project_ref(scene, antialiased)
    visible = (want[0] > 0).any(-1)
    # the scene exercises both outcomes in every camera
    assert visible.any(-1).all() and (~visible).any(-1).all()
    assert got[0].dtype == torch.int32 and torch.equal(got[0], want[0])
    for name, a, b in zip(OUT_NAMES[1:], got[1:], want[1:]):
        assert a.shape == b.shape and a.dtype == torch.float64, name
        assert rowwise_rel_err(a, b, 2) <= 1e-10, name
        # culled entries are exactly zero
        assert (a[~visible] == 0).all(), name


def test_project_fwd_clamped_jacobian_is_covered():
    # Visible Gaussians whose x/z lies beyond the clamp limit exist in the test scenes.
    means, _, _, _, viewmats, Ks = scene = make_scene(0)
    radii = project_op(scene, False)[0]
    p = torch.einsum("cij,nj->cni", viewmats[:, :3, :3], means) + viewmats[:, None, :3, 3]
    u = p[..., 0] / p[..., 2]
    fx, cx = Ks[:, 0, 0, None], Ks[:, 0, 2, None]
    lim = torch.maximum((W - cx) / fx, cx / fx) + 0.3 * 0.5 * W / fx
    assert ((radii > 0).any(-1) & (u.abs() > lim) & (p[..., 2] > 0)).sum() >= 5


@every_cpu_isa
@pytest.mark.parametrize("antialiased", [False, True])
def test_project_fwd_float32_close_to_float64_reference(antialiased):
    scene = make_scene(2, N=600)
    want = project_ref(scene, antialiased)
    got = project_op([t.float() for t in scene], antialiased)
    assert all(t.dtype == torch.float32 for t in got[1:])
    # ceil() at a boundary may flip a radius by one or a visibility: allow a few
    differ = (got[0] != want[0]).any(-1)
    assert differ.sum() <= 0.01 * differ.numel()
    both = (got[0] > 0).any(-1) & (want[0] > 0).any(-1) & ~differ
    means2d, depths, conics, opac2d = (t.double()[both] for t in got[1:])
    w_means2d, w_depths, w_conics, w_opac2d = (t[both] for t in want[1:])
    assert ((means2d - w_means2d).abs() / (w_means2d.abs() + W)).max() <= 1e-5
    assert ((depths - w_depths).abs() / w_depths).max() <= 1e-5
    # a conic's entries share the scale of its diagonal
    conic_scale = torch.maximum(w_conics[:, 0].abs(), w_conics[:, 2].abs())[:, None]
    assert ((conics - w_conics).abs() / conic_scale).max() <= 1e-4
    # the compensation of a near-degenerate covariance is ill-conditioned in float32; judge
    # it where the compensation is not tiny, absolutely (opacities are in (0, 1))
    ok = w_opac2d > 0.1 * scene[3][None].expand_as(want[4])[both] if antialiased else slice(None)
    assert (opac2d - w_opac2d)[ok].abs().max() <= 1e-5


@every_cpu_isa
@pytest.mark.parametrize("antialiased", [False, True])
def test_project_fwd_float32_lanes_bitwise_one_by_one(antialiased):
    """float32 runs 8 Gaussians of a camera per vector (csrc/cpu/projection_kernel.cpp: project_lanes),
    the rest one by one: projecting the scene at once (lanes, a tail of 5 per camera) gives each
    Gaussian's outputs bit for bit as projecting it alone (the scalar code), culled ones, NaN
    inputs and the clamped Jacobian's included."""
    scene = [t.float() for t in make_scene(4, N=45, C=2)]
    for i in range(4):
        scene[i] = scene[i].clone()
        scene[i][7 * i + 1] = float("nan")
    whole = project_op(scene, antialiased)
    for n in range(45):
        one = project_op([t[n:n + 1] for t in scene[:4]] + scene[4:], antialiased)
        for a, b in zip(whole, one):
            assert torch.equal(a[:, n:n + 1].nan_to_num(), b.nan_to_num()), n


def test_project_fwd_hand_computed():
    # One isotropic Gaussian on the optical axis of an identity camera.
    dtype = torch.float64
    fx, fy, cx, cy, z, s, o = 100.0, 80.0, 32.0, 24.0, 2.0, 0.1, 0.5
    means = torch.tensor([[0.0, 0.0, z]], dtype=dtype)
    quats = torch.tensor([[2.0, 0.0, 0.0, 0.0]], dtype=dtype)  # unnormalised identity
    scales = torch.full((1, 3), s, dtype=dtype)
    opacities = torch.tensor([o], dtype=dtype)
    viewmats = torch.eye(4, dtype=dtype)[None]
    Ks = torch.tensor([[[fx, 0, cx], [0, fy, cy], [0, 0, 1]]], dtype=dtype)
    for aa in (False, True):
        radii, means2d, depths, conics, opac2d = OPS.project_fwd(
            means, quats, scales, opacities, viewmats, Ks, W, H, EPS2D, NEAR, FAR, 0.0, aa)
        vx, vy = (fx * s / z) ** 2, (fy * s / z) ** 2  # cov2d diagonal before eps2d
        comp = math.sqrt(vx * vy / ((vx + EPS2D) * (vy + EPS2D))) if aa else 1.0
        k = ref.support_radius_factor(o * comp)
        assert radii.tolist() == [[[math.ceil(k * math.sqrt(vx + EPS2D)),
                                    math.ceil(k * math.sqrt(vy + EPS2D))]]]
        torch.testing.assert_close(means2d, torch.tensor([[[cx, cy]]], dtype=dtype))
        torch.testing.assert_close(depths, torch.tensor([[z]], dtype=dtype))
        torch.testing.assert_close(
            conics, torch.tensor([[[1 / (vx + EPS2D), 0.0, 1 / (vy + EPS2D)]]], dtype=dtype))
        torch.testing.assert_close(opac2d, torch.tensor([[o * comp]], dtype=dtype))


def test_project_fwd_culling_rules():
    means, quats, scales, opacities, viewmats, Ks = make_scene(3, N=200, C=1, hard=False)
    scene = (means, quats, scales, opacities, viewmats, Ks)
    radii = project_op(scene, False)[0]
    # a large radius_clip culls everything whose radii are both <= it
    clip = float(radii.amax(-1)[radii.amax(-1) > 0].median())
    clipped = project_op(scene, False, radius_clip=clip)[0]
    keep = radii.amax(-1) > clip
    assert torch.equal(clipped[keep], radii[keep]) and (clipped[~keep] == 0).all()
    assert torch.equal(clipped, project_ref(scene, False, radius_clip=clip)[0])
    # far plane
    out = OPS.project_fwd(*scene, W, H, EPS2D, NEAR, 4.0, 0.0, False)
    depth_cam = (means @ viewmats[0, :3, :3].T + viewmats[0, :3, 3])[:, 2]
    assert (out[0][0][depth_cam > 4.0] == 0).all()
    assert (out[0][0][(depth_cam < 4.0) & (radii[0] > 0).any(-1)] > 0).any()


def test_project_fwd_nan_inputs_are_culled():
    # The Python layer rejects NaN; the kernels still give defined output (culled), like the
    # reference, rather than garbage radii.
    scene = list(make_scene(9, N=40, C=1, hard=False))
    for i in range(4):
        scene[i] = scene[i].clone()
        scene[i][3 * i] = float("nan")
    got, want = project_op(scene, True), project_ref(scene, True)
    assert torch.equal(got[0], want[0])
    assert (got[0][0, [0, 3, 6, 9]] == 0).all()


def test_project_empty_and_noncontiguous():
    means, quats, scales, opacities, viewmats, Ks = make_scene(4, N=50, C=2)
    # N = 0 and C = 0
    out = OPS.project_fwd(means[:0], quats[:0], scales[:0], opacities[:0], viewmats, Ks, W, H,
                          EPS2D, NEAR, FAR, 0.0, True)
    assert [tuple(t.shape) for t in out] == [(2, 0, 2), (2, 0, 2), (2, 0), (2, 0, 3), (2, 0)]
    out = OPS.project_fwd(means, quats, scales, opacities, viewmats[:0], Ks[:0], W, H, EPS2D,
                          NEAR, FAR, 0.0, True)
    assert [tuple(t.shape) for t in out] == [(0, 50, 2), (0, 50, 2), (0, 50), (0, 50, 3), (0, 50)]
    grads = OPS.project_bwd(means[:0], quats[:0], scales[:0], opacities[:0], viewmats, Ks, W, H,
                            EPS2D, True, out[0][:, :0].new_zeros(2, 0, 2),
                            means.new_zeros(2, 0, 2), means.new_zeros(2, 0),
                            means.new_zeros(2, 0, 3), means.new_zeros(2, 0))
    assert (grads[4] == 0).all() and grads[0].shape == (0, 3)
    # non-contiguous views give the same result as contiguous copies
    nc = (means.T.contiguous().T, quats[:, [0, 1, 2, 3]].T.contiguous().T, scales,
          opacities.repeat_interleave(2)[::2], viewmats.transpose(1, 2).contiguous().transpose(1, 2),
          Ks)
    assert not nc[0].is_contiguous() and not nc[3].is_contiguous()
    for a, b in zip(project_op(nc, True), project_op((means, quats, scales, opacities, viewmats,
                                                      Ks), True)):
        assert torch.equal(a, b)


# -------------------------------------------------------------------------- projection bwd


def _random_out_grads(like, g: torch.Generator):
    return [torch.randn(t.shape, generator=g, dtype=t.dtype) for t in like]


@every_cpu_isa
@pytest.mark.parametrize("antialiased", [False, True])
@pytest.mark.parametrize("seed", [0, 5])
def test_project_bwd_matches_autograd_of_reference(seed, antialiased):
    scene = make_scene(seed, N=300)
    leaves = [t.clone().requires_grad_(True) for t in scene[:5]]
    want = project_ref((*leaves, scene[5]), antialiased)
    v_outs = _random_out_grads(want[1:], torch.Generator().manual_seed(seed + 100))
    torch.autograd.backward(want[1:], v_outs)
    radii = project_op(scene, antialiased)[0]
    got = OPS.project_bwd(*scene, W, H, EPS2D, antialiased, radii, *v_outs)
    for name, a, leaf in zip(GRAD_NAMES, got, leaves):
        assert a.shape == leaf.shape and a.dtype == torch.float64, name
        err = rowwise_rel_err(a, leaf.grad, 1)
        assert err <= 1e-8, f"{name}: {err:.3e}"
    assert (got[4][:, 3] == 0).all()  # the viewmats' last row gets no gradient


@every_cpu_isa
@pytest.mark.parametrize("antialiased", [False, True])
def test_project_bwd_float32_lanes_bitwise_one_by_one(antialiased):
    """float32 runs the backward 8 Gaussians per vector too (csrc/cpu/projection_kernel.cpp:
    project_bwd_lanes), the rest one by one: the scene at once (5 blocks of 8 and a tail of 5)
    gives each Gaussian's gradients bit for bit as its backward alone (the scalar code) — culled
    in some cameras or all, the clamped Jacobian — and v_viewmats their sum."""
    scene = [t.float() for t in make_scene(4, N=45, C=2)]
    radii = project_op(scene, antialiased)[0]
    assert (radii[0, :40] == 0).all(-1).any() and (radii[0, :40] > 0).all(-1).any()
    v_outs = _random_out_grads(project_op(scene, antialiased)[1:], torch.Generator().manual_seed(3))
    whole = OPS.project_bwd(*scene, W, H, EPS2D, antialiased, radii, *v_outs)
    v_view = torch.zeros(2, 4, 4, dtype=torch.float64)
    for n in range(45):
        one = OPS.project_bwd(*[t[n:n + 1] for t in scene[:4]], *scene[4:], W, H, EPS2D,
                              antialiased, radii[:, n:n + 1], *(v[:, n:n + 1] for v in v_outs))
        for a, b in zip(whole[:4], one[:4]):
            assert torch.equal(a[n:n + 1], b), n
        v_view += one[4].double()
    torch.testing.assert_close(whole[4].double(), v_view, rtol=1e-5, atol=1e-5)


def test_project_bwd_culled_get_zero_gradient():
    scene = make_scene(6, N=200)
    radii = project_op(scene, True)[0]
    g = torch.Generator().manual_seed(1)
    C, N = radii.shape[:2]
    v_outs = _random_out_grads([torch.empty(C, N, 2, dtype=torch.float64),
                                torch.empty(C, N, dtype=torch.float64),
                                torch.empty(C, N, 3, dtype=torch.float64),
                                torch.empty(C, N, dtype=torch.float64)], g)
    culled_everywhere = (radii == 0).all(-1).all(0)  # [N]
    assert culled_everywhere.sum() > 10
    got = OPS.project_bwd(*scene, W, H, EPS2D, True, radii, *v_outs)
    for a in got[:4]:
        assert (a[culled_everywhere] == 0).all()
    # with every Gaussian culled, nothing at all
    got = OPS.project_bwd(*scene, W, H, EPS2D, True, torch.zeros_like(radii), *v_outs)
    assert all((a == 0).all() for a in got)


def test_project_bwd_independent_of_thread_count():
    scene = make_scene(7, N=1500, C=2)
    radii = project_op(scene, True)[0]
    v_outs = _random_out_grads(project_op(scene, True)[1:], torch.Generator().manual_seed(2))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = OPS.project_bwd(*scene, W, H, EPS2D, True, radii, *v_outs)
        torch.set_num_threads(max(2, threads))
        many = OPS.project_bwd(*scene, W, H, EPS2D, True, radii, *v_outs)
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for a, b in zip(one, many))


class _Project(torch.autograd.Function):
    """The op pair as an autograd function (only for the finite-difference check)."""

    @staticmethod
    def forward(ctx, means, quats, scales, opacities, viewmats, Ks, antialiased):
        out = OPS.project_fwd(means, quats, scales, opacities, viewmats, Ks, W, H, EPS2D, NEAR,
                              FAR, 0.0, antialiased)
        ctx.save_for_backward(means, quats, scales, opacities, viewmats, Ks, out[0])
        ctx.antialiased = antialiased
        return out[1:]

    @staticmethod
    def backward(ctx, *v_outs):
        *inputs, radii = ctx.saved_tensors
        grads = OPS.project_bwd(*inputs, W, H, EPS2D, ctx.antialiased, radii, *v_outs)
        return (*grads, None, None)


@pytest.mark.parametrize("antialiased", [False, True])
def test_project_gradcheck(antialiased):
    g = torch.Generator().manual_seed(8)
    N = 6
    viewmats, Ks = make_cameras(g, 2)
    means = 0.5 * torch.randn(N, 3, generator=g, dtype=torch.float64)
    means[0] = torch.tensor([3.3, 0.3, 0.2], dtype=torch.float64)  # clamped J, still visible
    quats = torch.randn(N, 4, generator=g, dtype=torch.float64)
    scales = 0.05 + 0.2 * torch.rand(N, 3, generator=g, dtype=torch.float64)
    scales[0] = 0.8
    opacities = 0.2 + 0.7 * torch.rand(N, generator=g, dtype=torch.float64)
    inputs = [t.requires_grad_(True) for t in (means, quats, scales, opacities, viewmats)]
    radii = OPS.project_fwd(*inputs, Ks, W, H, EPS2D, NEAR, FAR, 0.0, antialiased)[0]
    assert (radii > 0).any(-1).all()
    assert torch.autograd.gradcheck(lambda *x: _Project.apply(*x, Ks, antialiased), inputs,
                                    eps=1e-6, atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------------------------- SH


def make_sh(seed: int, C: int = 3, N: int = 64, K: int = 16, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    dirs = torch.randn(C, N, 3, generator=g, dtype=dtype) * 3  # unnormalised
    coeffs = torch.randn(N, K, 3, generator=g, dtype=dtype)
    return dirs, coeffs


@every_cpu_isa
@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_sh_fwd_bwd_match_reference(degree):
    dirs, coeffs = make_sh(degree)
    d = dirs.clone().requires_grad_(True)
    co = coeffs.clone().requires_grad_(True)
    want = ref.sh_eval(degree, d, co[None])  # [C,N,3]
    got = OPS.sh_fwd(degree, dirs, coeffs)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    v_colors = torch.randn(want.shape, generator=torch.Generator().manual_seed(9),
                           dtype=torch.float64)
    torch.autograd.backward(want, v_colors)
    v_dirs, v_coeffs = OPS.sh_bwd(degree, dirs, coeffs, v_colors)
    want_v_dirs = d.grad if d.grad is not None else torch.zeros_like(dirs)  # degree 0: const
    assert rowwise_rel_err(v_dirs, want_v_dirs, 2) <= 1e-10 or degree == 0
    assert (v_dirs == want_v_dirs).all() or degree > 0
    assert rowwise_rel_err(v_coeffs, co.grad, 1) <= 1e-10
    assert (v_coeffs[:, (degree + 1) ** 2:] == 0).all()  # unused coefficients


def test_sh_exact_k_float32_and_zero_dir():
    dirs, coeffs = make_sh(11, K=9)
    dirs[0, 0] = 0.0  # F.normalize semantics: a zero direction is not NaN
    want = ref.sh_eval(2, dirs, coeffs[None])
    got = OPS.sh_fwd(2, dirs.float(), coeffs.float())
    assert got.dtype == torch.float32 and torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    v = torch.randn_like(want)
    v_dirs, v_coeffs = OPS.sh_bwd(2, dirs.float(), coeffs.float(), v.float())
    w_dirs, w_coeffs = OPS.sh_bwd(2, dirs, coeffs, v)
    torch.testing.assert_close(v_dirs[:, 1:].double(), w_dirs[:, 1:], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(v_coeffs.double(), w_coeffs, rtol=1e-4, atol=1e-5)


class _Sh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, dirs, coeffs, degree):
        ctx.save_for_backward(dirs, coeffs)
        ctx.degree = degree
        return OPS.sh_fwd(degree, dirs, coeffs)

    @staticmethod
    def backward(ctx, v_colors):
        dirs, coeffs = ctx.saved_tensors
        return (*OPS.sh_bwd(ctx.degree, dirs, coeffs, v_colors), None)


def test_sh_gradcheck():
    dirs, coeffs = make_sh(12, C=2, N=4)
    dirs.requires_grad_(True)
    coeffs.requires_grad_(True)
    for degree in range(4):
        assert torch.autograd.gradcheck(lambda d, c, k=degree: _Sh.apply(d, c, k), (dirs, coeffs))


# ---------------------------------------------------------------------------------- errors


def test_bad_inputs_raise_named_errors():
    means, quats, scales, opacities, viewmats, Ks = make_scene(0, N=10, C=1)

    def fwd(**kw):
        args = {"means": means, "quats": quats, "scales": scales, "opacities": opacities,
                "viewmats": viewmats, "Ks": Ks}
        args.update(kw)
        return OPS.project_fwd(*args.values(), W, H, EPS2D, NEAR, FAR, 0.0, False)

    with pytest.raises(ValueError, match="means"):
        fwd(means=means[:, :2])
    with pytest.raises(ValueError, match="quats"):
        fwd(quats=quats[:5])
    with pytest.raises(ValueError, match="opacities"):
        fwd(opacities=opacities[:, None])
    with pytest.raises(ValueError, match="Ks"):
        fwd(Ks=Ks[:, :2])
    with pytest.raises(ValueError, match="viewmats"):
        fwd(viewmats=viewmats[:, :3])
    with pytest.raises(TypeError, match="means"):
        fwd(means=means.long())
    with pytest.raises(TypeError, match="scales"):
        fwd(scales=scales.float())
    with pytest.raises(ValueError, match="width"):
        OPS.project_fwd(means, quats, scales, opacities, viewmats, Ks, 0, H, EPS2D, NEAR, FAR,
                        0.0, False)
    out = fwd()
    with pytest.raises(TypeError, match="radii"):
        OPS.project_bwd(means, quats, scales, opacities, viewmats, Ks, W, H, EPS2D, False,
                        out[0].long(), *out[1:])
    with pytest.raises(ValueError, match="v_conics"):
        OPS.project_bwd(means, quats, scales, opacities, viewmats, Ks, W, H, EPS2D, False,
                        out[0], out[1], out[2], out[3][..., :2], out[4])

    dirs, coeffs = make_sh(0, K=9)
    for degree in (-1, 4):
        with pytest.raises(ValueError, match="degree"):
            OPS.sh_fwd(degree, dirs, coeffs)
    with pytest.raises(ValueError, match="coeffs"):
        OPS.sh_fwd(3, dirs, coeffs)  # K = 9 < 16
    with pytest.raises(ValueError, match="dirs"):
        OPS.sh_fwd(1, dirs[0], coeffs)
    with pytest.raises(TypeError, match="coeffs"):
        OPS.sh_fwd(1, dirs, coeffs.float())
    with pytest.raises(TypeError, match="dirs"):
        OPS.sh_fwd(1, dirs.int(), coeffs)
    with pytest.raises(ValueError, match="v_colors"):
        OPS.sh_bwd(1, dirs, coeffs, dirs[:, :3])


# -------------------------------------------------------------------------------- CUDA


@cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("antialiased", [False, True])
def test_project_cuda_matches_cpu(dtype, antialiased):
    # N not a multiple of the block size, several cameras: exercises the block reduction
    scene = [t.to(dtype) for t in make_scene(13, N=1000, C=3)]
    cpu = project_op(scene, antialiased)
    dev = project_op([t.cuda() for t in scene], antialiased)
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    differ = (dev[0].cpu() != cpu[0]).any(-1)
    assert differ.sum() <= (0 if dtype == torch.float64 else 0.01 * differ.numel())
    for name, a, b in zip(OUT_NAMES[1:], dev[1:], cpu[1:]):
        assert rowwise_rel_err(a.cpu()[~differ], b[~differ], 1) <= tol, name
    radii = cpu[0]
    v_outs = _random_out_grads(cpu[1:], torch.Generator().manual_seed(3))
    v_outs = [t.to(dtype) for t in v_outs]
    g_cpu = OPS.project_bwd(*scene, W, H, EPS2D, antialiased, radii, *v_outs)
    g_dev = OPS.project_bwd(*[t.cuda() for t in scene], W, H, EPS2D, antialiased, radii.cuda(),
                            *[t.cuda() for t in v_outs])
    for name, a, b in zip(GRAD_NAMES, g_dev, g_cpu):
        # float32: fast-math and atomics reorder sums; viewmats sum over N Gaussians
        err = rowwise_rel_err(a.cpu(), b, 1)
        assert err <= (1e-9 if dtype == torch.float64 else 2e-3), f"{name}: {err:.3e}"


@cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("C", [1, 3])
def test_sh_cuda_matches_cpu(dtype, C):
    dirs, coeffs = make_sh(14, C=C, N=777, dtype=dtype)
    v = torch.randn_like(dirs)
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    for degree in range(4):
        a = OPS.sh_fwd(degree, dirs.cuda(), coeffs.cuda()).cpu()
        assert rowwise_rel_err(a, OPS.sh_fwd(degree, dirs, coeffs), 2) <= tol
        dv, cv = OPS.sh_bwd(degree, dirs.cuda(), coeffs.cuda(), v.cuda())
        wdv, wcv = OPS.sh_bwd(degree, dirs, coeffs, v)
        assert rowwise_rel_err(dv.cpu(), wdv, 2) <= tol
        assert rowwise_rel_err(cv.cpu(), wcv, 1) <= tol
