"""Tests of the dense reference renderer (gsrender/reference.py), the project's test oracle.

Every expectation here is computed independently of reference.py: per-pixel Python loops,
hand-derived closed forms, numerical Jacobians, quaternion algebra and a generic real-SH
evaluator built from associated Legendre polynomials.
"""
from __future__ import annotations

import math

import pytest
import torch

from gsrender import reference as ref
from gsrender.io import paths
from tests.conftest import rotation

F64 = torch.float64
DATA = paths.data_dir()


def _intrinsics(fx, fy, cx, cy, dtype=F64):
    return torch.tensor([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]], dtype=dtype)


def _viewmat(R, t):
    V = torch.eye(4, dtype=R.dtype)
    V[:3, :3] = R
    V[:3, 3] = torch.as_tensor(t, dtype=R.dtype)
    return V


# ------------------------------------------------------------------ (1) sequential compositing


def _pixel_alpha_py(px, py, m, conic, o):
    """α of one pair in plain Python floats (pixel centre px+0.5, py+0.5)."""
    dx, dy = m[0] - (px + 0.5), m[1] - (py + 0.5)
    a, b, c = conic
    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
    if sigma < 0:
        return 0.0
    alpha = min(0.99, o * math.exp(-sigma))
    return alpha if alpha >= 1 / 255 else 0.0


def _screen_scene(seed, C=2, N=30, width=12, height=10, CH=5):
    """Random projected Gaussians, plus a nearly opaque stack and an exact depth tie."""
    g = torch.Generator().manual_seed(seed)
    means2d = torch.rand(C, N, 2, generator=g, dtype=F64) * torch.tensor([width, height])
    # random SPD cov2d -> conic
    L = torch.randn(C, N, 2, 2, generator=g, dtype=F64) * 1.5
    cov = L @ L.transpose(-1, -2) + 0.5 * torch.eye(2, dtype=F64)
    inv = torch.linalg.inv(cov)
    conics = torch.stack([inv[..., 0, 0], inv[..., 0, 1], inv[..., 1, 1]], dim=-1)
    opac = torch.rand(C, N, generator=g, dtype=F64) * 0.9 + 0.05
    depths = torch.rand(C, N, generator=g, dtype=F64) * 5 + 1
    colors = torch.rand(C, N, CH, generator=g, dtype=F64)
    # Gaussians 0..4: an opaque stack over the pixel block around (4, 4) -> early stops
    means2d[:, :5] = torch.tensor([4.3, 4.6], dtype=F64) + 0.3 * torch.rand(C, 5, 2, generator=g)
    conics[:, :5] = torch.tensor([0.15, 0.0, 0.15], dtype=F64)
    opac[:, :5] = torch.tensor([0.999, 0.97, 0.95, 0.98, 0.9], dtype=F64)
    # Gaussians 5 and 6 share a depth: index order must decide
    depths[:, 6] = depths[:, 5]
    means2d[:, 6] = means2d[:, 5] + 0.5
    bg = torch.rand(C, CH, generator=g, dtype=F64)
    return means2d, conics, opac, colors, depths, bg


@pytest.mark.parametrize("seed", [0, 1])
def test_sorted_matches_sequential_compositing(seed):
    width, height = 12, 10
    means2d, conics, opac, colors, depths, bg = _screen_scene(seed, width=width, height=height)
    # one invalid Gaussian in camera 0 must be ignored entirely
    valid = torch.ones_like(opac, dtype=torch.bool)
    valid[0, 7] = False
    render, alphas = ref.rasterize(means2d, conics, opac, colors, depths, width, height,
                                   backgrounds=bg, valid=valid)
    assert render.shape == (2, height, width, 5) and alphas.shape == (2, height, width, 1)
    stops = 0
    for c in range(2):
        order = sorted(range(opac.shape[1]), key=lambda n: (float(depths[c, n]), n))
        order = [n for n in order if valid[c, n]]
        for py in range(height):
            for px in range(width):
                a_list = [_pixel_alpha_py(px, py, means2d[c, n].tolist(), conics[c, n].tolist(),
                                          float(opac[c, n])) for n in order]
                col, alpha = ref.composite_sequential(a_list, [colors[c, n] for n in order], bg[c])
                torch.testing.assert_close(render[c, py, px], col, rtol=1e-12, atol=1e-12)
                assert abs(float(alphas[c, py, px, 0]) - alpha) < 1e-12
                stops += math.prod(1 - a for a in a_list) < ref.TRANSMITTANCE_MIN
    assert stops > 0, "the scene must exercise the early stop"


def test_composite_sequential_semantics():
    # the second Gaussian would push T to 0.01·0.005 < 1e-4: it is excluded, the pixel stops
    col, alpha = ref.composite_sequential([0.99, 0.995, 0.5], [1.0, 2.0, 3.0], 0.25)
    assert alpha == pytest.approx(0.99)
    assert col == pytest.approx(0.99 * 1.0 + 0.01 * 0.25)
    # pairs below 1/255 are skipped, not composited
    col, alpha = ref.composite_sequential([0.003, 0.5], [10.0, 1.0], 0.0)
    assert col == pytest.approx(0.5) and alpha == pytest.approx(0.5)


def test_weighted_matches_per_pixel_formula():
    width, height = 12, 10
    means2d, conics, opac, colors, depths, bg = _screen_scene(3, width=width, height=height)
    sigma_w, beta, w_bg = 0.3, 1.5, 0.05
    render, alphas = ref.rasterize(means2d, conics, opac, colors, depths, width, height,
                                   backgrounds=bg, mode="weighted",
                                   weight_params=(sigma_w, beta, w_bg))
    for c in range(2):
        for py in range(0, height, 3):
            for px in range(width):
                num, den, T = bg[c] * w_bg, w_bg, 1.0
                for n in range(opac.shape[1]):
                    a = _pixel_alpha_py(px, py, means2d[c, n].tolist(), conics[c, n].tolist(),
                                        float(opac[c, n]))
                    w = a * math.exp(-sigma_w * float(depths[c, n]) ** beta)
                    num, den, T = num + w * colors[c, n], den + w, T * (1 - a)
                torch.testing.assert_close(render[c, py, px], num / den, rtol=1e-12, atol=1e-12)
                assert abs(float(alphas[c, py, px, 0]) - (1 - T)) < 1e-12


@pytest.mark.parametrize("mode", ref.MODES)
def test_chunking_and_blend_weights_agree(mode, monkeypatch):
    width, height = 12, 10
    means2d, conics, opac, colors, depths, bg = _screen_scene(4, width=width, height=height)
    full = ref.rasterize(means2d, conics, opac, colors, depths, width, height, bg, mode=mode)
    bw = ref.blend_weights(means2d, conics, opac, depths, width, height, mode=mode)
    via_w = bw["weights"] @ colors[:, None] + bw["bg_weights"] * bg[:, None, None]
    torch.testing.assert_close(via_w, full[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(bw["alphas"], full[1], rtol=1e-12, atol=1e-12)
    # several chunks (7 pixels each, ragged tail), checkpointed: same values and gradients
    inputs = [t.clone().requires_grad_(True) for t in (means2d, conics, opac, colors, depths, bg)]
    v = [torch.randn_like(t) for t in full]

    def run():
        out = ref.rasterize(*inputs[:5], width, height, inputs[5], mode=mode)
        grads = torch.autograd.grad(sum((o * w).sum() for o, w in zip(out, v)), inputs,
                                    allow_unused=True)
        return [o.detach() for o in out] + [g for g in grads if g is not None]

    whole = run()
    monkeypatch.setattr(ref, "CHUNK_PAIRS", 7 * opac.shape[1])
    chunked = run()
    assert len(whole) == len(chunked) >= 7
    for a, b in zip(whole, chunked):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(whole[0], full[0], rtol=0, atol=0)


# ---------------------------------------------------------------------------- (2) projection


def test_projection_straight_ahead_closed_form():
    fx, fy, cx, cy, W, H = 50.0, 40.0, 31.0, 22.5, 64, 48
    z, s, o = 5.0, 0.3, 0.8
    means = torch.tensor([[0.0, 0.0, z]], dtype=F64)
    quats = torch.tensor([[0.3, -0.2, 0.5, 0.7]], dtype=F64)  # irrelevant: isotropic scale
    scales = torch.full((1, 3), s, dtype=F64)
    opac = torch.tensor([o], dtype=F64)
    vm = torch.eye(4, dtype=F64)[None]
    Ks = _intrinsics(fx, fy, cx, cy)[None]
    cov_x = fx**2 * s**2 / z**2 + 0.3
    cov_y = fy**2 * s**2 / z**2 + 0.3
    # the support's radius factor written out here (not ref.support_radius_factor: the oracle's own)
    k = math.sqrt(2 * math.log(ref.ALPHA_MIN_INV * o))
    for aa in (False, True):
        out = ref.project(means, quats, scales, opac, vm, Ks, W, H, antialiased=aa)
        torch.testing.assert_close(out["means2d"][0, 0], torch.tensor([cx, cy], dtype=F64))
        torch.testing.assert_close(out["depths"][0, 0], torch.tensor(z, dtype=F64))
        torch.testing.assert_close(out["conics"][0, 0],
                                   torch.tensor([1 / cov_x, 0.0, 1 / cov_y], dtype=F64))
        comp = math.sqrt((cov_x - 0.3) * (cov_y - 0.3) / (cov_x * cov_y)) if aa else 1.0
        o2d = o * comp
        assert float(out["opacities2d"][0, 0]) == pytest.approx(o2d, rel=1e-12)
        k = math.sqrt(2 * math.log(ref.ALPHA_MIN_INV * o2d))
        assert out["radii"].dtype == torch.int32
        assert out["radii"][0, 0].tolist() == [math.ceil(k * math.sqrt(cov_x)),
                                               math.ceil(k * math.sqrt(cov_y))]


def _quat_rotate(q, v):
    """Rotate v by the unit quaternion q (wxyz) as q·v·q*, via the Hamilton product."""
    def mul(p, r):
        pw, px, py, pz = p
        rw, rx, ry, rz = r
        return (pw * rw - px * rx - py * ry - pz * rz, pw * rx + px * rw + py * rz - pz * ry,
                pw * ry - px * rz + py * rw + pz * rx, pw * rz + px * ry - py * rx + pz * rw)
    conj = (q[0], -q[1], -q[2], -q[3])
    return mul(mul(q, (0.0, *v)), conj)[1:]


def test_quat_to_rotmat_matches_quaternion_algebra():
    g = torch.Generator().manual_seed(0)
    quats = torch.randn(6, 4, generator=g, dtype=F64) * 3  # any norm
    R = ref.quat_to_rotmat(quats)
    for n in range(6):
        q = (quats[n] / quats[n].norm()).tolist()
        for i, e in enumerate(torch.eye(3, dtype=F64).tolist()):
            torch.testing.assert_close(R[n][:, i], torch.tensor(_quat_rotate(q, e), dtype=F64))
    # 90° about z maps x to y
    s = math.sqrt(0.5)
    Rz = ref.quat_to_rotmat(torch.tensor([[s, 0.0, 0.0, s]], dtype=F64))[0]
    torch.testing.assert_close(Rz @ torch.tensor([1.0, 0, 0], dtype=F64),
                               torch.tensor([0.0, 1, 0], dtype=F64))


def _expected_projection(mean, quat, scale, V, K, W, H, eps2d=0.3):
    """cov2d from the numerical Jacobian of the pinhole map at the (clamped) camera point."""
    R, t = V[:3, :3], V[:3, 3]
    p = R @ mean + t
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    q = (quat / quat.norm()).tolist()
    Rq = torch.stack([torch.tensor(_quat_rotate(q, e), dtype=F64)
                      for e in torch.eye(3, dtype=F64).tolist()], dim=1)
    cov_c = R @ Rq @ torch.diag(scale**2) @ Rq.T @ R.T
    # the rule clamps x/z, y/z before evaluating J
    tanx, tany = 0.5 * W / fx, 0.5 * H / fy
    u = torch.clamp(p[0] / p[2], -(cx / fx + 0.3 * tanx), (W - cx) / fx + 0.3 * tanx)
    v = torch.clamp(p[1] / p[2], -(cy / fy + 0.3 * tany), (H - cy) / fy + 0.3 * tany)
    p_j = torch.stack([u * p[2], v * p[2], p[2]])

    def pinhole(pp):
        return torch.stack([fx * pp[0] / pp[2] + cx, fy * pp[1] / pp[2] + cy])

    J = torch.autograd.functional.jacobian(pinhole, p_j)  # [2,3]
    cov2d = J @ cov_c @ J.T + eps2d * torch.eye(2, dtype=F64)
    return pinhole(p), p[2], cov2d


def test_projection_general_case_and_fov_clamp():
    W, H = 40, 30
    V = _viewmat(rotation(0.3, -0.5, 0.2), [0.2, -0.1, 4.0])
    K = _intrinsics(35.0, 38.0, 19.0, 16.0)
    Rt = V[:3, :3].T
    # one in view (camera point (0.4, −0.3, 5)), three beyond the clamp limits on each side
    # (x/z = 2.5, x/z = −2.5 and y/z = −1.8, y/z = 2.5) with footprints that reach the image
    cam_pts = torch.tensor([[0.4, -0.3, 5.0], [12.5, 0.5, 5.0], [-12.5, -9.0, 5.0],
                            [0.5, 12.5, 5.0]], dtype=F64)
    means = (cam_pts - V[:3, 3]) @ Rt.T
    quats = torch.tensor([[0.9, 0.1, -0.3, 0.2], [0.5, 0.5, 0.1, -0.4], [0.1, 0.8, 0.3, 0.2],
                          [0.3, -0.2, 0.6, 0.5]], dtype=F64)
    scales = torch.tensor([[0.3, 0.05, 0.15], [12.0, 9.0, 10.0], [11.0, 8.0, 10.0],
                           [9.0, 13.0, 10.0]], dtype=F64)
    opac = torch.tensor([0.6, 0.7, 0.8, 0.9], dtype=F64)
    out = ref.project(means, quats, scales, opac, V[None], K[None], W, H)
    assert (out["radii"][0] > 0).all()
    for n in range(4):
        m2d, z, cov2d = _expected_projection(means[n], quats[n], scales[n], V, K, W, H)
        torch.testing.assert_close(out["means2d"][0, n], m2d)
        torch.testing.assert_close(out["depths"][0, n], z)
        a, b, c = out["conics"][0, n]
        conic = torch.stack([torch.stack([a, b]), torch.stack([b, c])])
        torch.testing.assert_close(torch.linalg.inv(conic), cov2d)
    # the clamp matters for the last three: their means lie well outside the image
    m2d = out["means2d"][0]
    assert m2d[1, 0] > W and m2d[2, 0] < 0 and m2d[2, 1] < 0 and m2d[3, 1] > H


def test_projection_culling_and_safe_gradients():
    W, H = 32, 24
    K = _intrinsics(30.0, 30.0, 16.0, 12.0)[None]
    vm = torch.eye(4, dtype=F64)[None]
    means = torch.tensor([
        [0.0, 0.0, 3.0],     # 0 visible
        [0.0, 0.0, -2.0],    # 1 behind the camera
        [1.0, 0.0, 0.0],     # 2 in the camera plane (x/z undefined)
        [0.0, 0.0, 0.005],   # 3 closer than near_plane
        [0.0, 0.0, 3.0],     # 4 opacity below 1/255
        [40.0, 0.0, 3.0],    # 5 off-screen to the right
        [0.0, -30.0, 3.0],   # 6 off-screen above
        [0.0, 0.0, 2e10],    # 7 beyond far_plane
        [-1.8, 0.0, 3.0],    # 8 centre 2 px left of the image, its box (r ≥ 3) reaches in
        [0.0, 1.4, 3.0],     # 9 centre 2 px below the image, likewise
    ], dtype=F64, requires_grad=True)
    alive_expected = [True] + [False] * 7 + [True, True]
    N = means.shape[0]
    quats = torch.tensor([[1.0, 0.0, 0.0, 0.0]] * N, dtype=F64, requires_grad=True)
    scales = torch.full((N, 3), 0.05, dtype=F64, requires_grad=True)
    opac = torch.full((N,), 0.5, dtype=F64)
    opac[4] = 0.003
    opac.requires_grad_(True)
    vmg = vm.clone().requires_grad_(True)
    for aa in (False, True):
        out = ref.project(means, quats, scales, opac, vmg, K, W, H, antialiased=aa)
        alive = (out["radii"][0] > 0).all(-1)
        assert alive.tolist() == alive_expected
        torch.testing.assert_close(out["means2d"][0, 8:], torch.tensor([[-2.0, 12.0], [16.0, 26.0]],
                                                                       dtype=F64))
        assert (out["radii"][0, 8:] >= 3).all()
        for key in ("means2d", "depths", "conics", "opacities2d"):
            assert (out[key][0, 1:8] == 0).all(), key
        loss = sum(out[k].square().sum() for k in ("means2d", "depths", "conics", "opacities2d"))
        grads = torch.autograd.grad(loss, (means, quats, scales, opac, vmg))
        for gr in grads:
            assert torch.isfinite(gr).all()
        for gr in grads[:4]:
            assert (gr[1:8] == 0).all()
    # radius_clip culls Gaussians whose box is not larger than the clip
    r = ref.project(means, quats, scales, opac, vm, K, W, H)["radii"][0, 0]
    assert (ref.project(means, quats, scales, opac, vm, K, W, H,
                        radius_clip=float(r.max()))["radii"] == 0).all()
    # and the whole renderer stays finite too
    img = ref.render(means, quats, scales, opac, torch.rand(N, 3, dtype=F64), vmg, K, W, H)
    gr = torch.autograd.grad(img["colors"].sum() + img["depths"].sum(), (means, scales, vmg))
    assert all(torch.isfinite(x).all() for x in gr)


# ---------------------------------------------------------------------------- (3) SH


def _legendre(l, m, x):
    """Associated Legendre P_l^m(x), m ≥ 0, with the Condon–Shortley phase."""
    pmm = torch.ones_like(x)
    somx2 = torch.sqrt(1 - x * x)
    for i in range(1, m + 1):
        pmm = pmm * (-(2 * i - 1)) * somx2
    if l == m:
        return pmm
    pmm1 = x * (2 * m + 1) * pmm
    for ll in range(m + 2, l + 1):
        pmm, pmm1 = pmm1, ((2 * ll - 1) * x * pmm1 - (ll + m - 1) * pmm) / (ll - m)
    return pmm1


def _real_sh(l, m, dirs):
    """Real SH Y_lm on unit dirs [...,3] from spherical coordinates (3DGS ordering m=−l..l)."""
    x, y, z = dirs.unbind(-1)
    theta, phi = torch.acos(z), torch.atan2(y, x)
    am = abs(m)
    K = math.sqrt((2 * l + 1) / (4 * math.pi) * math.factorial(l - am) / math.factorial(l + am))
    P = _legendre(l, am, torch.cos(theta))
    if m == 0:
        return K * P
    trig = torch.cos(am * phi) if m > 0 else torch.sin(am * phi)
    return math.sqrt(2) * K * trig * P


def test_sh_against_legendre_basis():
    g = torch.Generator().manual_seed(0)
    dirs = torch.randn(50, 3, generator=g, dtype=F64)
    coeffs = torch.randn(50, 16, 3, generator=g, dtype=F64)
    unit = dirs / dirs.norm(dim=-1, keepdim=True)
    # degree 0: only C0·c0, whatever the direction
    torch.testing.assert_close(ref.sh_eval(0, dirs, coeffs), ref.SH_C0 * coeffs[:, 0])
    assert ref.SH_C0 == pytest.approx(1 / (2 * math.sqrt(math.pi)), rel=1e-15)
    expected = torch.zeros(50, 3, dtype=F64)
    k = 0
    for l in range(4):
        for m in range(-l, l + 1):
            expected = expected + _real_sh(l, m, unit)[:, None] * coeffs[:, k]
            k += 1
        torch.testing.assert_close(ref.sh_eval(l, dirs * 2.5, coeffs), expected,
                                   rtol=1e-12, atol=1e-12)
    # extra coefficients beyond (degree+1)^2 are ignored; broadcasting over cameras works
    out = ref.sh_eval(1, dirs[None].expand(2, 50, 3), coeffs[None])
    torch.testing.assert_close(out[1], ref.sh_eval(1, dirs, coeffs[:, :4]))


def test_sh_colors_direction_and_clamp():
    means = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], dtype=F64)
    V = _viewmat(rotation(0.1, 0.4, -0.3), [0.5, -1.0, 2.0])
    campos = -V[:3, :3].T @ V[:3, 3]
    torch.testing.assert_close(ref.camera_centers(V[None])[0], campos)
    sh = torch.zeros(2, 4, 3, dtype=F64)
    sh[:, 3] = 1.0  # colour = −C1·x_dir + 0.5, clamped at 0
    sh[1, 0] = -10.0  # very negative DC: clamped to 0
    out = ref.sh_colors(means, sh, V[None], 1)
    d = (means[0] - campos) / (means[0] - campos).norm()
    torch.testing.assert_close(out[0, 0], (0.5 - ref.SH_C1 * d[0]).expand(3))
    assert (out[0, 1] == 0).all()


# ---------------------------------------------------------------------------- (4) gradcheck


def _grad_scene(seed, C=2, N=5, W=8, H=6):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(N, 3, generator=g, dtype=F64) * 0.35
    means[:4] = means[0] + 0.05 * torch.randn(4, 3, generator=g, dtype=F64)  # an opaque stack
    quats = torch.randn(N, 4, generator=g, dtype=F64)
    scales = torch.rand(N, 3, generator=g, dtype=F64) * 0.2 + 0.12
    opac = torch.rand(N, generator=g, dtype=F64) * 0.5 + 0.3
    opac[:4] = torch.tensor([0.97, 0.96, 0.95, 0.9], dtype=F64)
    scales[:4] += 0.15  # wide enough to stop a few pixels
    colors = torch.rand(N, 3, generator=g, dtype=F64)
    feats = torch.randn(N, 2, generator=g, dtype=F64)
    bg = torch.rand(C, 3, generator=g, dtype=F64)
    vms = torch.stack([_viewmat(rotation(0.1 * c, -0.2 * c, 0.05), [0.1 * c, 0.0, 3.0])
                       for c in range(C)])
    Ks = _intrinsics(9.0, 9.0, W / 2, H / 2)[None].repeat(C, 1, 1)
    return means, quats, scales, opac, colors, feats, bg, vms, Ks


def _margins_ok(scene, W, H, rel=1e-4):
    """No pair near the 1/255 cut or the 0.99 clamp, no pixel near the 1e-4 stop, no Gaussian
    near a projection cull or the J clamp: finite differences must not cross any of them."""
    means, quats, scales, opac, _, _, _, vms, Ks = scene
    meta = ref.project(means, quats, scales, opac, vms, Ks, W, H)
    if not (meta["radii"] > 0).all():
        return False, 0
    m2d, con, o2d, z = meta["means2d"], meta["conics"], meta["opacities2d"], meta["depths"]
    ys, xs = torch.meshgrid(torch.arange(H, dtype=F64), torch.arange(W, dtype=F64), indexing="ij")
    pix = torch.stack([xs, ys], -1).reshape(-1, 2) + 0.5
    stops = 0
    for c in range(vms.shape[0]):
        d = m2d[c][None] - pix[:, None]
        a, b, cc = con[c].unbind(-1)
        sig = 0.5 * (a * d[..., 0] ** 2 + cc * d[..., 1] ** 2) + b * d[..., 0] * d[..., 1]
        raw = o2d[c] * torch.exp(-sig)
        if ((raw - ref.ALPHA_MIN).abs() < rel).any() or ((raw - ref.ALPHA_MAX).abs() < rel).any():
            return False, 0
        A = torch.where(raw >= ref.ALPHA_MIN, raw.clamp_max(ref.ALPHA_MAX), 0)
        Tin = torch.cumprod(1 - A[:, torch.sort(z[c], stable=True).indices], dim=-1)
        if ((Tin / ref.TRANSMITTANCE_MIN - 1).abs() < 1e-3).any():
            return False, 0
        stops += int((Tin[:, -1] < ref.TRANSMITTANCE_MIN).sum())
        u = (m2d[c, :, 0] - Ks[c, 0, 2]) / Ks[c, 0, 0]
        if (u.abs() > 0.5 * W / Ks[c, 0, 0]).any():  # well inside the clamp limits
            return False, 0
    return True, stops


@pytest.fixture(scope="module")
def grad_scene():
    for seed in range(200):
        scene = _grad_scene(seed)
        ok, stops = _margins_ok(scene, 8, 6)
        if ok and stops >= 2:
            return scene
    pytest.fail("no seed gives a gradcheck scene with margins and an early stop")


@pytest.mark.parametrize("mode", ref.MODES)
def test_render_gradcheck(mode, grad_scene):
    means, quats, scales, opac, colors, feats, bg, vms, Ks = grad_scene
    W, H = 8, 6
    wp = (0.4, 1.0, 0.05) if mode == "weighted" else ref.DEFAULT_WEIGHT_PARAMS

    def f(means, quats, scales, opac, colors, feats, bg, vms):
        out = ref.render(means, quats, scales, opac, colors, vms, Ks, W, H, features=feats,
                         backgrounds=bg, mode=mode, weight_params=wp)
        return out["colors"], out["depths"], out["features"], out["alphas"]

    inputs = tuple(t.clone().requires_grad_(True)
                   for t in (means, quats, scales, opac, colors, feats, bg, vms))
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


def test_render_sh_gradcheck(grad_scene):
    means, quats, scales, opac, _, _, _, vms, Ks = grad_scene
    g = torch.Generator().manual_seed(1)
    sh = torch.randn(means.shape[0], 16, 3, generator=g, dtype=F64) * 0.2
    sh[:, 0] = 1.0  # colours well above the clamp at 0
    assert (ref.sh_colors(means, sh, vms, 3) > 0.05).all()

    def f(means, sh, vms):
        return ref.render(means, quats, scales, opac, sh, vms, Ks, 8, 6, sh_degree=3)["colors"]

    inputs = tuple(t.clone().requires_grad_(True) for t in (means, sh, vms))
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


def test_project_antialiased_gradcheck(grad_scene):
    means, quats, scales, opac, _, _, _, vms, Ks = grad_scene

    def f(means, quats, scales, opac, vms):
        out = ref.project(means, quats, scales, opac, vms, Ks, 8, 6, antialiased=True)
        return out["means2d"], out["depths"], out["conics"], out["opacities2d"]

    inputs = tuple(t.clone().requires_grad_(True) for t in (means, quats, scales, opac, vms))
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


# --------------------------------------------------------------- (5) order, channels, errors


def test_weighted_is_order_independent():
    width, height = 12, 10
    means2d, conics, opac, colors, depths, bg = _screen_scene(5, width=width, height=height)
    perm = torch.randperm(opac.shape[1], generator=torch.Generator().manual_seed(0))
    a = ref.rasterize(means2d, conics, opac, colors, depths, width, height, bg, mode="weighted")
    b = ref.rasterize(means2d[:, perm], conics[:, perm], opac[:, perm], colors[:, perm],
                      depths[:, perm], width, height, bg, mode="weighted")
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-14)
    # sorted mode depends on depth only, not on input order, when depths are distinct
    depths[:, 6] += 0.01
    a = ref.rasterize(means2d, conics, opac, colors, depths, width, height, bg)
    b = ref.rasterize(means2d[:, perm], conics[:, perm], opac[:, perm], colors[:, perm],
                      depths[:, perm], width, height, bg)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", ref.MODES)
def test_render_channels_match_separate_passes(mode, grad_scene):
    means, quats, scales, opac, colors, feats, bg, vms, Ks = grad_scene
    W, H = 8, 6
    out = ref.render(means, quats, scales, opac, colors, vms, Ks, W, H, features=feats,
                     backgrounds=bg, mode=mode)
    meta = out["meta"]
    args = (meta["means2d"], meta["conics"], meta["opacities2d"])
    C, N = meta["depths"].shape
    rgb, alphas = ref.rasterize(*args, colors.expand(C, N, 3), meta["depths"], W, H, bg, mode=mode)
    dep, _ = ref.rasterize(*args, meta["depths"][..., None], meta["depths"], W, H, mode=mode)
    fea, _ = ref.rasterize(*args, feats.expand(C, N, 2), meta["depths"], W, H, mode=mode)
    torch.testing.assert_close(out["colors"], rgb, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["depths"], dep, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["features"], fea, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out["alphas"], alphas, rtol=1e-12, atol=1e-12)
    if mode == "sorted":  # expected depth Σwz = (depth/alpha)·alpha: within the depth range
        ed = out["depths"] / out["alphas"].clamp_min(1e-12)
        covered = out["alphas"] > 0.05
        assert ((ed[covered] > 2.0) & (ed[covered] < 4.5)).all()
    assert out["colors"].dtype == F64 and out["meta"]["radii"].dtype == torch.int32


def test_float32_and_empty_inputs(grad_scene):
    means, quats, scales, opac, colors, _, bg, vms, Ks = grad_scene
    f32 = [t.float() for t in (means, quats, scales, opac, colors, vms, Ks)]
    C = vms.shape[0]
    out32 = ref.render(*f32, 8, 6, backgrounds=bg[0].float())  # [3] background: all cameras
    out64 = ref.render(means, quats, scales, opac, colors[None].expand(C, -1, -1), vms, Ks, 8, 6,
                       backgrounds=bg[0])
    assert out32["colors"].dtype == torch.float32 and out32["features"] is None
    torch.testing.assert_close(out32["colors"].double(), out64["colors"], rtol=1e-4, atol=1e-4)
    # nothing valid: background everywhere, alpha 0, gradients still defined
    for mode in ref.MODES:
        m2d = torch.zeros(C, 3, 2, dtype=F64, requires_grad=True)
        img, alpha = ref.rasterize(m2d, torch.zeros(C, 3, 3, dtype=F64),
                                   torch.zeros(C, 3, dtype=F64), torch.ones(C, 3, 2, dtype=F64),
                                   torch.ones(C, 3, dtype=F64), 4, 3,
                                   backgrounds=torch.full((C, 2), 0.25, dtype=F64), mode=mode)
        assert (img == 0.25).all() and (alpha == 0).all()
        (g,) = torch.autograd.grad(img.sum(), m2d, allow_unused=True)
        assert g is None or (g == 0).all()


def test_bad_input_errors_name_the_argument():
    m2d, con, o, col, z, bg = _screen_scene(0)
    with pytest.raises(ValueError, match="mode"):
        ref.rasterize(m2d, con, o, col, z, 12, 10, mode="fancy")
    with pytest.raises(ValueError, match="backgrounds"):
        ref.rasterize(m2d, con, o, col, z, 12, 10, backgrounds=bg[:, :3])
    with pytest.raises(ValueError, match="conics"):
        ref.rasterize(m2d, con[..., :2], o, col, z, 12, 10)
    with pytest.raises(ValueError, match="weight_params"):
        ref.rasterize(m2d, con, o, col, z, 12, 10, mode="weighted", weight_params=(1.0, 1.0, 0.0))
    with pytest.raises(ValueError, match="degree"):
        ref.sh_eval(4, torch.ones(2, 3), torch.ones(2, 25, 3))
    with pytest.raises(ValueError, match="coeffs"):
        ref.sh_eval(2, torch.ones(2, 3), torch.ones(2, 4, 3))
    with pytest.raises(TypeError, match="quats"):
        ref.quat_to_rotmat([[1.0, 0.0, 0.0, 0.0]])


# ---------------------------------------------------------------------------- real data


@pytest.mark.skipif(not (DATA / "garden" / "test_garden.npz").exists(),
                    reason="shared data folder absent")
def test_garden_points_small_render_matches_sequential():
    np = pytest.importorskip("numpy")
    d = np.load(DATA / "garden" / "test_garden.npz")
    scale = 0.1  # 648x420 -> 64x42
    W, H = int(d["width"]) // 10, int(d["height"]) // 10
    vm = torch.from_numpy(d["viewmats"][:1]).to(F64)
    K = torch.from_numpy(d["Ks"][:1]).to(F64)
    K[:, :2] *= scale
    pts = torch.from_numpy(d["means3d"]).to(F64)
    z = (pts @ vm[0, :3, :3].T + vm[0, :3, 3])[:, 2]
    g = torch.Generator().manual_seed(0)
    # a seeded subset of the points in front of the camera, gsplat-test-style attributes
    idx = torch.nonzero(z > 0.5).squeeze(1)
    idx = idx[torch.randperm(idx.numel(), generator=g)[:2000]]
    N = idx.numel()
    means = pts[idx]
    quats = torch.randn(N, 4, generator=g, dtype=F64)
    scales = torch.rand(N, 3, generator=g, dtype=F64) * 0.05 + 0.01
    opac = torch.rand(N, generator=g, dtype=F64)
    colors = torch.from_numpy(d["colors"]).to(F64)[idx] / 255
    out = ref.render(means, quats, scales, opac, colors, vm, K, W, H)
    assert out["colors"].shape == (1, H, W, 3)
    assert torch.isfinite(out["colors"]).all() and (out["alphas"] > 0.5).float().mean() > 0.2
    meta = out["meta"]
    order = sorted(range(N), key=lambda n: (float(meta["depths"][0, n]), n))
    order = [n for n in order if meta["radii"][0, n].max() > 0]
    pg = torch.Generator().manual_seed(1)
    for _ in range(6):
        px, py = int(torch.randint(W, (1,), generator=pg)), int(torch.randint(H, (1,), generator=pg))
        a_list = [_pixel_alpha_py(px, py, meta["means2d"][0, n].tolist(),
                                  meta["conics"][0, n].tolist(), float(meta["opacities2d"][0, n]))
                  for n in order]
        col, alpha = ref.composite_sequential(a_list, [colors[n] for n in order],
                                              torch.zeros(3, dtype=F64))
        torch.testing.assert_close(out["colors"][0, py, px], col, rtol=1e-10, atol=1e-10)
        assert abs(float(out["alphas"][0, py, px, 0]) - alpha) < 1e-10
