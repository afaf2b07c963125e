"""Gradients of gsrender.rasterize and of the raw rasterize op (CPU).

1. torch.autograd.gradcheck (float64, finite differences) of gsrender.rasterize in every
   differentiable input, both modes, antialiased on and off, on tiny scenes chosen so that no
   discrete decision (1/255 cut, 0.99 clamp, 1e-4 stop, culling, J clamp, SH clamp at 0) sits
   within reach of the finite-difference step.
2. Backward against autograd through reference.render on a medium scene: relative error
   ‖g − g_ref‖/‖g_ref‖ ≤ 1e-4 in float64, cosine ≥ 0.999 in float32, for every input.
3. The raw op (ops.rasterize) against autograd through reference.rasterize, and its gradcheck.
"""
from __future__ import annotations

import pytest
import torch

import gsrender
from gsrender import ops
from gsrender import reference as ref
from tests.conftest import F32, F64, Scene, cameras, every_cpu_isa, pair_alphas, random_scene, render_ref

MODES = ("sorted", "weighted")
GRAD_INPUTS = ("means", "quats", "scales", "opacities", "colors", "features", "backgrounds",
               "viewmats")
W_GC, H_GC = 8, 6
# weighted mode: a steeper depth weight and a visible background, so their gradients are not tiny
WP = (0.4, 1.0, 0.05)


def _wp(mode):
    return WP if mode == "weighted" else gsrender.DEFAULT_WEIGHT_PARAMS


# ---------------------------------------------------------------------------- scene selection


def _tiny_scene(seed: int) -> Scene:
    """6 Gaussians (5 of them a nearly opaque stack: early stops, also with antialiasing),
    2 cameras, 8x6."""
    g = torch.Generator().manual_seed(seed)
    N = 6
    means = torch.randn(N, 3, generator=g, dtype=F64) * 0.35
    means[:5] = means[0] + 0.05 * torch.randn(5, 3, generator=g, dtype=F64)
    scales = torch.rand(N, 3, generator=g, dtype=F64) * 0.2 + 0.12
    scales[:5] += 0.3
    opac = torch.rand(N, generator=g, dtype=F64) * 0.5 + 0.3
    opac[:5] = torch.tensor([0.985, 0.97, 0.96, 0.95, 0.9], dtype=F64)
    vms, Ks = cameras(2, W_GC, H_GC, seed=seed, dist=3.0, angle=0.15)
    Ks[:, 0, 0] = Ks[:, 1, 1] = 9.0  # a wide view: the whole group fits in 8x6
    return Scene(means, torch.randn(N, 4, generator=g, dtype=F64), scales, opac,
                 torch.rand(N, 3, generator=g, dtype=F64), vms, Ks, W_GC, H_GC,
                 features=torch.randn(N, 2, generator=g, dtype=F64),
                 backgrounds=torch.rand(2, 3, generator=g, dtype=F64))


def _margins(scene: Scene, antialiased: bool, rel: float = 1e-4) -> tuple[bool, int]:
    """(no decision within reach of the finite differences, number of early-stopped pixels)."""
    s = scene
    meta = ref.project(s.means, s.quats, s.scales, s.opacities, s.viewmats, s.Ks, s.width,
                       s.height, antialiased=antialiased)
    if not (meta["radii"] > 0).all():
        return False, 0
    # means well inside the J clamp limits (those are hit only far outside the image)
    u = (meta["means2d"][..., 0] - s.Ks[:, None, 0, 2]) / s.Ks[:, None, 0, 0]
    if (u.abs() > 0.5 * s.width / s.Ks[:, None, 0, 0]).any():
        return False, 0
    stops = 0
    for _, _, _, A, raw, _ in pair_alphas(s, antialiased=antialiased):
        if ((raw * ref.ALPHA_MIN_INV - 1).abs() < rel).any() or ((raw / ref.ALPHA_MAX - 1).abs() < rel).any():
            return False, 0
        T = torch.cumprod(1 - A, -1)
        if ((T / ref.TRANSMITTANCE_MIN - 1).abs() < 1e-3).any():
            return False, 0
        stops += int((T[:, -1] < ref.TRANSMITTANCE_MIN).sum())
    return True, stops


@pytest.fixture(scope="module")
def tiny_scene() -> Scene:
    for seed in range(300):
        scene = _tiny_scene(seed)
        ok0, stops0 = _margins(scene, False)
        ok1, stops1 = _margins(scene, True)
        if ok0 and ok1 and stops0 >= 2 and stops1 >= 2:
            return scene
    pytest.fail("no seed gives a gradcheck scene with margins and early stops")


# ---------------------------------------------------------------------------------- gradcheck


def _outputs(out: gsrender.RenderOutput, k: int = 8):
    """k fixed random linear combinations of every output value (colour, depth, alpha,
    features). gradcheck then compares P·J_analytic with P·J_numeric for a dense random P [k,M]:
    any wrong Jacobian entry shows up (almost surely), at k instead of M backward passes."""
    flat = torch.cat([t.reshape(-1) for t in (out.colors, out.depths, out.alphas, out.features)
                      if t is not None])
    P = torch.randn(k, flat.numel(), generator=torch.Generator().manual_seed(flat.numel()),
                    dtype=flat.dtype)
    return P @ flat


@pytest.mark.parametrize("antialiased", (False, True), ids=("plain", "aa"))
@pytest.mark.parametrize("mode", MODES)
def test_gradcheck_all_inputs(tiny_scene, mode, antialiased):
    s = tiny_scene
    inputs = tuple(getattr(s, k).clone().requires_grad_(True) for k in GRAD_INPUTS)

    def f(means, quats, scales, opacities, colors, features, backgrounds, viewmats):
        return _outputs(gsrender.rasterize(
            means, quats, scales, opacities, colors, viewmats, s.Ks, s.width, s.height,
            features=features, backgrounds=backgrounds, mode=mode, antialiased=antialiased,
            weight_params=_wp(mode)))

    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


def test_gradcheck_sh(tiny_scene):
    """SH coefficients (degree 3, every band); viewmats and means also reach the colours through
    the SH view direction. The rasterizer after the colours is the same as above."""
    s = tiny_scene
    g = torch.Generator().manual_seed(1)
    sh = 0.2 * torch.randn(s.N, 16, 3, generator=g, dtype=F64)
    sh[:, 0] = 1.0  # colours well above the clamp at 0
    assert (ref.sh_colors(s.means, sh, s.viewmats, 3) > 0.05).all()
    inputs = tuple(t.clone().requires_grad_(True) for t in (s.means, sh, s.viewmats))

    def f(means, sh, viewmats):
        return _outputs(gsrender.rasterize(means, s.quats, s.scales, s.opacities, sh, viewmats,
                                           s.Ks, s.width, s.height, sh_degree=3))

    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_gradcheck_per_camera_inputs(tiny_scene, mode):
    """Per-camera colours [C,N,3] and features [C,N,D], one background [3] for all cameras."""
    s = tiny_scene
    g = torch.Generator().manual_seed(2)
    colors = torch.rand(s.C, s.N, 3, generator=g, dtype=F64)
    feats = torch.randn(s.C, s.N, 2, generator=g, dtype=F64)
    bg = torch.rand(3, generator=g, dtype=F64)
    inputs = tuple(t.clone().requires_grad_(True) for t in (colors, feats, bg))

    def f(colors, feats, bg):
        return _outputs(gsrender.rasterize(
            s.means, s.quats, s.scales, s.opacities, colors, s.viewmats, s.Ks, s.width, s.height,
            features=feats, backgrounds=bg, mode=mode, weight_params=_wp(mode)))

    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


# --------------------------------------------------------------- backward vs reference autograd


def _grads(fn, scene: Scene, names, cotangents, **kw):
    leaves = {k: getattr(scene, k).detach().clone().requires_grad_(True) for k in names}
    s = Scene(**{**vars(scene), **leaves})
    out = fn(s, **kw)
    outs = {k: (getattr(out, k) if not isinstance(out, dict) else out[k]) for k in cotangents}
    loss = sum((outs[k].double() * cotangents[k]).sum() for k in cotangents)
    grads = torch.autograd.grad(loss, [leaves[k] for k in names])
    return dict(zip(names, grads))


def _gs(s: Scene, **kw):
    return gsrender.rasterize(*s.inputs(), **s.kwargs(), **kw)


def _medium_scene(sh: bool) -> Scene:
    scene = random_scene(N=300, C=2, width=64, height=48, seed=21, D=4, radius=1.0,
                         scale_range=(0.03, 0.25))
    if sh:
        g = torch.Generator().manual_seed(2)
        coeffs = 0.15 * torch.randn(scene.N, 16, 3, generator=g, dtype=F64)
        coeffs[:, 0] = (torch.rand(scene.N, 3, generator=g, dtype=F64) - 0.3) / ref.SH_C0
        scene.colors, scene.sh_degree = coeffs, 3
    return scene


def _cotangents(scene: Scene, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    C, H, W = scene.C, scene.height, scene.width
    cot = {k: torch.randn(C, H, W, ch, generator=g, dtype=F64)
           for k, ch in (("colors", 3), ("depths", 1), ("alphas", 1))}
    cot["depths"] *= 0.2  # depths are ~4x larger than colours: keep each output's share similar
    if scene.features is not None:
        cot["features"] = torch.randn(C, H, W, scene.features.shape[-1], generator=g, dtype=F64)
    return cot


@every_cpu_isa
@pytest.mark.parametrize("variant", ("rgb", "sh_aa"))
@pytest.mark.parametrize("mode", MODES)
def test_backward_matches_reference_autograd(mode, variant):
    scene = _medium_scene(sh=variant == "sh_aa")
    kw = {"mode": mode, "antialiased": variant == "sh_aa", "weight_params": _wp(mode)}
    cot = _cotangents(scene)
    expected = _grads(render_ref, scene, GRAD_INPUTS, cot, **kw)
    assert float(render_ref(scene, **kw)["alphas"].mean()) > 0.3
    got = _grads(_gs, scene, GRAD_INPUTS, cot, **kw)
    for k in GRAD_INPUTS:
        e, g = expected[k], got[k]
        assert float(e.norm()) > 0, k
        rel = float((g - e).norm() / e.norm())
        assert rel <= 1e-4, f"{k}: relative error {rel:.3g}"
    # float32 inputs: the same gradients up to float32 rounding (and the rare threshold flip)
    s32 = scene.cast(F32)
    got = _grads(_gs, s32, GRAD_INPUTS, {k: v.float() for k, v in cot.items()}, **kw)
    expected = _grads(render_ref, s32, GRAD_INPUTS, cot, **kw)
    for k in GRAD_INPUTS:
        g, e = got[k].double().flatten(), expected[k].double().flatten()
        cos = float(g @ e / (g.norm() * e.norm()))
        assert cos >= 0.999, f"{k}: cosine {cos:.6f} (float32)"
        assert got[k].dtype == F32


# ------------------------------------------------------------------------------------ raw op


def _screen_inputs(seed: int, C=2, N=200, W=40, H=30, D=3, dtype=F64):
    """Projected Gaussians from the reference projection of a random scene, plus channels."""
    scene = random_scene(N=N, C=C, width=W, height=H, seed=seed, D=D)
    meta = ref.project(scene.means, scene.quats, scene.scales, scene.opacities, scene.viewmats,
                       scene.Ks, W, H)
    g = torch.Generator().manual_seed(seed)
    chans = torch.rand(C, N, 3 + D, generator=g, dtype=F64)
    bg = torch.rand(C, 3 + D, generator=g, dtype=F64)
    t = {"means2d": meta["means2d"], "conics": meta["conics"], "opacities": meta["opacities2d"],
         "colors": chans, "depths": meta["depths"], "backgrounds": bg}
    return {k: v.to(dtype) for k, v in t.items()}, meta["radii"], W, H


def _op(t: dict, radii, W, H, mode: str, tile_size: int = 16):
    offsets, ids = ops.bin_tiles(t["means2d"].detach(), radii, t["depths"].detach(), W, H,
                                 tile_size, mode == "sorted")
    render, alphas, *_ = ops.rasterize(
        t["means2d"], t["conics"], t["opacities"], t["colors"], t["depths"], t["backgrounds"],
        offsets, ids, W, H, tile_size, ops.SORTED if mode == "sorted" else ops.WEIGHTED,
        list(_wp(mode)), "auto")
    return render, alphas


def _op_ref(t: dict, radii, W, H, mode: str):
    return ref.rasterize(t["means2d"], t["conics"], t["opacities"], t["colors"], t["depths"],
                         W, H, backgrounds=t["backgrounds"], mode=mode, weight_params=_wp(mode),
                         valid=radii.amax(-1) > 0)


@pytest.mark.parametrize("mode", MODES)
def test_raw_op_gradients_match_reference(mode):
    t64, radii, W, H = _screen_inputs(3)
    g = torch.Generator().manual_seed(0)
    C = radii.shape[0]
    v_render = torch.randn(C, H, W, t64["colors"].shape[-1], generator=g, dtype=F64)
    v_alpha = torch.randn(C, H, W, 1, generator=g, dtype=F64)
    for dtype in (F64, F32):
        leaves = {k: v.to(dtype).requires_grad_(True) for k, v in t64.items()}
        render, alphas = _op(leaves, radii, W, H, mode)
        got = torch.autograd.grad((render.double() * v_render).sum() + (alphas.double() * v_alpha).sum(),
                                  list(leaves.values()))
        rleaves = {k: v.detach().double().requires_grad_(True) for k, v in leaves.items()}
        e_render, e_alphas = _op_ref(rleaves, radii, W, H, mode)
        assert (render.double() - e_render).abs().max() < (1e-12 if dtype == F64 else 1e-4)
        assert (alphas.double() - e_alphas).abs().max() < (1e-12 if dtype == F64 else 1e-4)
        expected = torch.autograd.grad((e_render * v_render).sum() + (e_alphas * v_alpha).sum(),
                                       list(rleaves.values()), allow_unused=True)
        for k, gk, ek in zip(leaves, got, expected):
            if ek is None:  # sorted mode: depths only order the Gaussians
                assert k == "depths" and mode == "sorted" and (gk == 0).all(), k
                continue
            assert float(ek.norm()) > 0, k
            if dtype == F64:
                rel = float((gk - ek).norm() / ek.norm())
                assert rel <= 1e-10, f"{k}: relative error {rel:.3g}"
            else:
                cos = float(gk.double().flatten() @ ek.flatten() / (gk.double().norm() * ek.norm()))
                assert cos >= 0.9999, f"{k}: cosine {cos:.6f} (float32)"


@pytest.mark.parametrize("mode", MODES)
def test_raw_op_gradcheck(tiny_scene, mode):
    s = tiny_scene
    meta = ref.project(s.means, s.quats, s.scales, s.opacities, s.viewmats, s.Ks, s.width,
                       s.height)
    g = torch.Generator().manual_seed(4)
    chans = torch.rand(s.C, s.N, 4, generator=g, dtype=F64)
    bg = torch.rand(s.C, 4, generator=g, dtype=F64)
    names = ("means2d", "conics", "opacities", "colors", "depths", "backgrounds")
    inputs = tuple(t.clone().requires_grad_(True) for t in (
        meta["means2d"], meta["conics"], meta["opacities2d"], chans, meta["depths"], bg))

    def f(*args):
        render, alphas = _op(dict(zip(names, args)), meta["radii"], s.width, s.height, mode,
                             tile_size=4)
        flat = torch.cat([render.reshape(-1), alphas.reshape(-1)])
        P = torch.randn(8, flat.numel(), generator=torch.Generator().manual_seed(0), dtype=F64)
        return P @ flat  # 8 random combinations of every output (see _outputs)

    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)
