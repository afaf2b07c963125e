"""Front doors (gsrender.compat): gsplat.rasterization and the 3DGS GaussianRasterizer give the
native renderer's output, accept their libraries' typical arguments and reject unsupported ones."""
import contextlib
import math

import numpy as np
import pytest
import torch

import gsrender
from gsrender import synthetic as S
from gsrender.compat.gsplat import rasterization
from gsrender.compat.inria import GaussianRasterizationSettings, GaussianRasterizer
from gsrender.reference import covariances as reference_covariances

W, H = 64, 48


@pytest.fixture(scope="module")
def scene():
    m = S.make_scene(400, n_objects=3, seed=1, sh_degree=1, feature_dim=32, feature_kind="random")
    vm, K = S.orbit_cameras(2, 4.0, 1.5, width=W, height_px=H)
    return m, vm, K


def _args(m, vm, K, colors):
    return (m.means, m.quats, m.scales, m.opacities, colors, vm, K, W, H)


@pytest.mark.parametrize("packed", [True, False])
def test_gsplat_rgb_matches_native(scene, packed):
    m, vm, K = scene
    bg = torch.rand(2, 3, generator=torch.Generator().manual_seed(0))
    ref = gsrender.rasterize(*_args(m, vm, K, m.sh), sh_degree=1, backgrounds=bg)
    img, alpha, meta = rasterization(*_args(m, vm, K, m.sh), sh_degree=1, backgrounds=bg,
                                     packed=packed)
    assert img.shape == (2, H, W, 3) and alpha.shape == (2, H, W, 1)
    assert torch.equal(img, ref.colors) and torch.equal(alpha, ref.alphas)
    assert meta["width"] == W and meta["height"] == H and meta["n_cameras"] == 2
    assert meta["tile_size"] == 16
    if packed:
        sel = (ref.meta["radii"] > 0).all(-1)
        assert meta["gaussian_ids"].shape == (int(sel.sum()),)
        assert torch.equal(meta["radii"], ref.meta["radii"][sel])
        assert torch.equal(meta["means2d"], ref.meta["means2d"][sel])
        assert torch.equal(meta["depths"], ref.meta["depths"][sel])
    else:
        assert meta["gaussian_ids"] is None
        for k in ("radii", "means2d", "depths", "conics", "opacities"):
            assert torch.equal(meta[k], ref.meta[k]), k


def test_gsplat_render_modes(scene):
    m, vm, K = scene
    ref = gsrender.rasterize(*_args(m, vm, K, m.sh), sh_degree=1)
    ed = ref.depths / ref.alphas.clamp(min=1e-10)
    expect = {"D": ref.depths, "ED": ed, "RGB+D": torch.cat([ref.colors, ref.depths], -1),
              "RGB+ED": torch.cat([ref.colors, ed], -1)}
    for mode, want in expect.items():
        img, alpha, _ = rasterization(*_args(m, vm, K, m.sh), sh_degree=1, render_mode=mode)
        assert img.shape == want.shape, mode
        torch.testing.assert_close(img, want, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(alpha, ref.alphas, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="render_mode"):
        rasterization(*_args(m, vm, K, m.sh), sh_degree=1, render_mode="N")


def test_gsplat_feature_channels_and_modes(scene):
    m, vm, K = scene
    feats = m.features  # [N, 32]
    ref = gsrender.rasterize(*_args(m, vm, K, m.sh), sh_degree=1, features=feats)
    img, alpha, _ = rasterization(*_args(m, vm, K, feats))
    assert img.shape == (2, H, W, 32)
    torch.testing.assert_close(img, ref.features, atol=1e-6, rtol=1e-6)
    assert torch.equal(alpha, ref.alphas)
    # per-camera colours [C,N,D] and a D-channel background (Σ w f + T·bg)
    bg = torch.rand(2, 32, generator=torch.Generator().manual_seed(1))
    img, _, _ = rasterization(*_args(m, vm, K, feats[None].expand(2, -1, -1)), backgrounds=bg,
                              render_mode="RGB+D")
    assert img.shape == (2, H, W, 33)
    want = ref.features + (1 - ref.alphas) * bg[:, None, None, :]
    torch.testing.assert_close(img[..., :32], want, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(img[..., 32:], ref.depths, atol=1e-6, rtol=1e-6)


def test_gsplat_per_camera_sh_and_antialiased(scene):
    m, vm, K = scene
    ref = gsrender.rasterize(*_args(m, vm, K, m.sh), sh_degree=1, antialiased=True)
    img, _alpha, meta = rasterization(*_args(m, vm, K, m.sh[None].expand(2, -1, -1, -1)),
                                     sh_degree=1, rasterize_mode="antialiased", packed=False)
    torch.testing.assert_close(img, ref.colors, atol=1e-6, rtol=1e-6)
    assert torch.equal(meta["opacities"], ref.meta["opacities"])
    with pytest.raises(ValueError, match="rasterize_mode"):
        rasterization(*_args(m, vm, K, m.sh), sh_degree=1, rasterize_mode="mip")


@pytest.mark.parametrize("packed", [False, True])
def test_gsplat_absgrad(scene, packed):
    m, vm, K = scene
    means = m.means.clone().requires_grad_(True)
    args = (means,) + _args(m, vm, K, m.sh)[1:]
    img, _, meta = rasterization(*args, sh_degree=1, packed=packed, absgrad=True)
    meta["means2d"].retain_grad()
    (img * torch.linspace(-1, 1, W)[None, None, :, None]).sum().backward()
    g = meta["means2d"].grad
    assert g is not None and g.abs().sum() > 0
    assert torch.equal(meta["means2d"].absgrad, g.abs())
    if packed:
        assert g.shape == (meta["gaussian_ids"].shape[0], 2)
    else:
        assert g.shape == (2, m.means.shape[0], 2)


@pytest.mark.parametrize("kw", [{"camera_model": "ftheta"}, {"sparse_grad": True},
                                {"with_eval3d": True}, {"segmented": True},
                                {"viewmats_rs": torch.eye(4).expand(2, 4, 4)},
                                {"some_new_option": 1}])
def test_gsplat_unsupported(scene, kw):
    m, vm, K = scene
    name = next(iter(kw))
    with pytest.raises(NotImplementedError, match=name):
        rasterization(*_args(m, vm, K, m.sh), sh_degree=1, **kw)


def test_gsplat_neutral_options_accepted(scene):
    m, vm, K = scene
    img, _, _ = rasterization(*_args(m, vm, K, m.sh), sh_degree=1, with_ut=False,
                              with_eval3d=False, covars=None, segmented=False)
    assert img.shape == (2, H, W, 3)


@pytest.mark.parametrize("name,width", [("radial_coeffs", 6), ("tangential_coeffs", 2),
                                        ("thin_prism_coeffs", 4)])
def test_gsplat_distortion_needs_with_ut(scene, name, width):
    m, vm, K = scene
    with pytest.raises(ValueError, match=f"{name}: .*pass with_ut=True"):
        rasterization(*_args(m, vm, K, m.sh), sh_degree=1, **{name: torch.zeros(2, width)})


@pytest.mark.parametrize("camera_model,kw", [
    ("pinhole", {}),
    ("pinhole", {"radial_coeffs": torch.tensor([[0.05, -0.01, 0.0, 0.01, 0.0, 0.0]] * 2),
                 "tangential_coeffs": torch.tensor([[1e-3, -2e-3]] * 2),
                 "thin_prism_coeffs": torch.tensor([[1e-3, 0.0, -1e-3, 0.0]] * 2)}),
    ("fisheye", {"radial_coeffs": torch.tensor([[0.05, 0.01, 0.0, 0.0]] * 2)}),
])
@pytest.mark.parametrize("packed", [True, False])
def test_gsplat_with_ut_matches_native(scene, camera_model, kw, packed):
    """with_ut and the coefficients reach gsrender.rasterize; the distortion changes the image."""
    m, vm, K = scene
    img, alphas, _ = rasterization(*_args(m, vm, K, m.sh), sh_degree=1, packed=packed,
                                      camera_model=camera_model, with_ut=True, **kw)
    ref = gsrender.rasterize(*_args(m, vm, K, m.sh), sh_degree=1, camera_model=camera_model,
                             with_ut=True, **kw)
    assert torch.equal(img, ref.colors) and torch.equal(alphas, ref.alphas)
    assert float(alphas.amax()) > 0.5
    if kw:
        plain = gsrender.rasterize(*_args(m, vm, K, m.sh), sh_degree=1, camera_model=camera_model,
                                   with_ut=True)
        assert float((plain.alphas - alphas).abs().amax()) > 0.05  # the coefficients count


@pytest.mark.parametrize("with_ut", [False, True])
def test_gsplat_covars_replace_quats_and_scales(scene, with_ut):
    """covars renders as the quats + scales they come from, and its gradient reaches covars.
    EWA: the same 2D Gaussians (float32 rounding apart). UT: the sigma points of covars lie along
    its Cholesky factor's columns, not along the principal axes, so the pinhole's curvature
    shifts the fit at second order: the Gaussians are shrunk to a fifth so that this stays
    below 5e-3 in every pixel (at full size the scene's largest splats, as wide as half their
    depth, differ by 0.2)."""
    m, vm, K = scene
    scales = m.scales * 0.2
    covars = reference_covariances(m.quats, scales).requires_grad_()
    img, alphas, _ = rasterization(m.means, None, None, m.opacities, m.sh, vm, K, W, H,
                                   sh_degree=1, covars=covars, with_ut=with_ut, packed=False)
    ref = gsrender.rasterize(m.means, m.quats, scales, m.opacities, m.sh, vm, K, W, H,
                             sh_degree=1, with_ut=with_ut)
    atol = 5e-3 if with_ut else 2e-5
    torch.testing.assert_close(img, ref.colors, atol=atol, rtol=0)
    torch.testing.assert_close(alphas, ref.alphas, atol=atol, rtol=0)
    img.sum().backward()
    assert covars.grad is not None and float(covars.grad.abs().sum()) > 0


@pytest.mark.parametrize("camera_model", ["pinhole", "ortho", "fisheye"])
def test_gsplat_camera_models_match_native(scene, camera_model):
    m, vm, K = scene
    K = K.clone()
    if camera_model == "ortho":
        K[:, :2, :2] = 12.0  # pixels per world unit: the scene spans the image
    img, alphas, meta = rasterization(*_args(m, vm, K, m.sh), sh_degree=1, packed=False,
                                      camera_model=camera_model)
    ref = gsrender.rasterize(m.means, m.quats, m.scales, m.opacities, m.sh, vm, K, W, H,
                             sh_degree=1, camera_model=camera_model)
    torch.testing.assert_close(img, ref.colors)
    torch.testing.assert_close(alphas, ref.alphas)
    assert float(alphas.amax()) > 0.5
    other = gsrender.rasterize(m.means, m.quats, m.scales, m.opacities, m.sh, vm, K, W, H,
                               sh_degree=1, camera_model="pinhole" if camera_model != "pinhole"
                               else "fisheye")
    assert float((other.alphas - alphas).abs().amax()) > 0.1  # the model is not ignored


@contextlib.contextmanager
def _world_of_one():
    """A gloo process group of this process alone."""
    import socket

    import torch.distributed as dist

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_gsplat_distributed_in_a_world_of_one(scene):
    """distributed=True renders through gsrender.distributed (each rank: its Gaussians and its
    cameras); in a world of one that is the single-process image and gradient."""
    m, vm, K = scene
    leaves = [t.clone().requires_grad_() for t in (m.means, m.opacities)]
    with _world_of_one():
        img, alphas, _ = rasterization(leaves[0], m.quats, m.scales, leaves[1], m.sh, vm, K, W, H,
                                       sh_degree=1, distributed=True, camera_model="fisheye")
        img.sum().backward()
    ref_leaves = [t.clone().requires_grad_() for t in (m.means, m.opacities)]
    ref, ref_alphas, _ = rasterization(ref_leaves[0], m.quats, m.scales, ref_leaves[1], m.sh, vm,
                                       K, W, H, sh_degree=1, camera_model="fisheye")
    ref.sum().backward()
    torch.testing.assert_close(img, ref)
    torch.testing.assert_close(alphas, ref_alphas)
    for a, b in zip(leaves, ref_leaves):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)


def test_gsplat_distributed_lens_options_in_a_world_of_one(scene):
    """distributed=True with covars, with_ut and distortion coefficients (which travel with the
    cameras): in a world of one the single-process image and covariance gradient."""
    m, vm, K = scene
    kw = {"with_ut": True, "radial_coeffs": torch.tensor([[0.05, -0.01, 0.0, 0.0, 0.0, 0.0]] * 2),
          "tangential_coeffs": torch.tensor([[1e-3, -2e-3]] * 2)}
    covars = reference_covariances(m.quats, m.scales * 0.5)
    leaves = [covars.clone().requires_grad_(), covars.clone().requires_grad_()]
    with _world_of_one():
        img, alphas, _ = rasterization(m.means, None, None, m.opacities, m.sh, vm, K, W, H,
                                       sh_degree=1, distributed=True, covars=leaves[0], **kw)
        img.sum().backward()
    ref, ref_alphas, _ = rasterization(m.means, None, None, m.opacities, m.sh, vm, K, W, H,
                                       sh_degree=1, covars=leaves[1], **kw)
    ref.sum().backward()
    torch.testing.assert_close(img, ref)
    torch.testing.assert_close(alphas, ref_alphas)
    assert float(alphas.detach().amax()) > 0.5
    torch.testing.assert_close(leaves[0].grad, leaves[1].grad)


# ----------------------------------------------------------------------------------------------
# 3DGS (graphdeco-inria) front door; the camera is built the way 3DGS's Camera class builds it


def _world2view2(R: np.ndarray, t: np.ndarray) -> np.ndarray:
    # 3DGS stores R as the transpose of the world-to-camera rotation
    Rt = np.zeros((4, 4))
    Rt[:3, :3] = R.transpose()
    Rt[:3, 3] = t
    Rt[3, 3] = 1.0
    return Rt.astype(np.float32)


def _projection(znear, zfar, fovx, fovy) -> torch.Tensor:
    top, right = math.tan(fovy / 2) * znear, math.tan(fovx / 2) * znear
    bottom, left = -top, -right
    P = torch.zeros(4, 4)
    P[0, 0] = 2 * znear / (right - left)
    P[1, 1] = 2 * znear / (top - bottom)
    P[0, 2] = (right + left) / (right - left)
    P[1, 2] = (top + bottom) / (top - bottom)
    P[3, 2] = 1.0
    P[2, 2] = zfar / (zfar - znear)
    P[2, 3] = -(zfar * znear) / (zfar - znear)
    return P


def _inria_camera(vm: torch.Tensor, K: torch.Tensor, bg, sh_degree=1, **extra):
    R = vm[:3, :3].double().numpy().T
    t = vm[:3, 3].double().numpy()
    fovx = 2 * math.atan(W / (2 * float(K[0, 0])))
    fovy = 2 * math.atan(H / (2 * float(K[1, 1])))
    world_view = torch.tensor(_world2view2(R, t)).transpose(0, 1)
    proj = _projection(0.01, 100.0, fovx, fovy).transpose(0, 1)
    full_proj = world_view.unsqueeze(0).bmm(proj.unsqueeze(0)).squeeze(0)
    campos = world_view.inverse()[3, :3]
    return GaussianRasterizationSettings(
        image_height=H, image_width=W, tanfovx=math.tan(fovx * 0.5), tanfovy=math.tan(fovy * 0.5),
        bg=bg, scale_modifier=2.0, viewmatrix=world_view, projmatrix=full_proj,
        sh_degree=sh_degree, campos=campos, prefiltered=False, debug=False, **extra)


def test_inria_matches_native(scene):
    m, vm, K = scene
    bg = torch.tensor([0.1, 0.2, 0.3])
    settings = _inria_camera(vm[0], K[0], bg)
    ref = gsrender.rasterize(m.means, m.quats, m.scales, m.opacities, m.sh, vm[:1], K[:1], W, H,
                             sh_degree=1, backgrounds=bg, near_plane=0.2)
    rast = GaussianRasterizer(raster_settings=settings)
    means2D = torch.zeros_like(m.means, requires_grad=True)
    color, radii = rast(means3D=m.means, means2D=means2D, shs=m.sh, colors_precomp=None,
                        opacities=m.opacities[:, None], scales=m.scales / 2.0,
                        rotations=m.quats * 3.0, cov3D_precomp=None)
    assert color.shape == (3, H, W) and radii.shape == (m.means.shape[0],)
    torch.testing.assert_close(color, ref.colors[0].permute(2, 0, 1), atol=1e-6, rtol=1e-6)
    assert torch.equal(radii, ref.meta["radii"][0].amax(-1))
    visible = rast.markVisible(m.means)
    assert visible.dtype == torch.bool and torch.all(visible[radii > 0])
    # precomputed colours and the optional depth
    rgb = m.sh[:, 0] * 0.2820948 + 0.5
    settings = _inria_camera(vm[0], K[0], bg, return_depth=True, antialiasing=True)
    ref = gsrender.rasterize(m.means, m.quats, m.scales, m.opacities, rgb, vm[:1], K[:1], W, H,
                             backgrounds=bg, near_plane=0.2, antialiased=True)
    color, radii, depth = GaussianRasterizer(settings)(m.means, None, m.opacities[:, None],
                                                       colors_precomp=rgb, scales=m.scales / 2.0,
                                                       rotations=m.quats)
    torch.testing.assert_close(color, ref.colors[0].permute(2, 0, 1), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(depth, ref.depths[0].permute(2, 0, 1), atol=1e-6, rtol=1e-6)


def test_inria_means2d_gradient(scene):
    m, vm, K = scene
    bg = torch.zeros(3)
    means = m.means.clone().requires_grad_(True)
    means2D = torch.zeros_like(m.means, requires_grad=True)
    means2D.retain_grad()  # as 3DGS does with screenspace_points
    rast = GaussianRasterizer(_inria_camera(vm[0], K[0], bg))
    color, radii = rast(means, means2D, m.opacities[:, None], shs=m.sh, scales=m.scales / 2.0,
                        rotations=m.quats)
    weight = torch.linspace(-1, 1, W)[None, None, :]
    (color * weight).sum().backward()
    assert means2D.grad is not None and means2D.grad[radii > 0, :2].abs().sum() > 0
    assert torch.all(means2D.grad[:, 2] == 0)
    # pixel-space gradient of the native renderer, scaled to NDC (W/2, H/2)
    means = m.means.clone().requires_grad_(True)
    ref = gsrender.rasterize(means, m.quats, m.scales, m.opacities, m.sh, vm[:1], K[:1], W, H,
                             sh_degree=1, backgrounds=bg, near_plane=0.2)
    ref.meta["means2d"].retain_grad()
    (ref.colors[0].permute(2, 0, 1) * weight).sum().backward()
    g = ref.meta["means2d"].grad[0]
    want = torch.stack([g[:, 0] * W / 2, g[:, 1] * H / 2], -1)
    torch.testing.assert_close(means2D.grad[:, :2], want, atol=1e-6, rtol=1e-5)
    with pytest.raises(NotImplementedError, match="cov3D_precomp"):
        rast(means, means2D, m.opacities[:, None], shs=m.sh, cov3D_precomp=torch.zeros(len(means), 6))


def test_gsplat_simple_trainer_style_loop():
    # the target: a scene; the model: the same scene with perturbed colours/opacities/scales
    target = S.make_scene(300, n_objects=2, seed=3, sh_degree=1)
    vm, K = S.orbit_cameras(3, 4.0, 1.5, width=W, height_px=H)
    with torch.no_grad():
        gt, _, _ = rasterization(target.means, target.quats, target.scales, target.opacities,
                                 target.sh, vm, K, W, H, sh_degree=1)
    gen = torch.Generator().manual_seed(0)
    params = torch.nn.ParameterDict({
        "means": target.means.clone(), "quats": target.quats.clone(),
        "scales": (target.scales.log() + 0.3 * torch.randn(target.scales.shape, generator=gen)),
        "opacities": torch.logit(target.opacities.clamp(1e-4, 1 - 1e-4)) - 1.0,
        "sh0": target.sh[:, :1] + 0.3 * torch.randn(target.sh[:, :1].shape, generator=gen),
        "shN": target.sh[:, 1:].clone()})
    lrs = {"means": 1e-3, "quats": 1e-3, "scales": 0.02, "opacities": 0.05, "sh0": 0.02,
           "shN": 1e-3}
    opt = torch.optim.Adam([{"params": p, "lr": lrs[k]} for k, p in params.items()])

    def render(c, **kw):
        colors = torch.cat([params["sh0"], params["shN"]], 1)
        return rasterization(
            means=params["means"], quats=params["quats"], scales=torch.exp(params["scales"]),
            opacities=torch.sigmoid(params["opacities"]), colors=colors, viewmats=vm[c],
            Ks=K[c], width=W, height=H, sh_degree=1, near_plane=0.01, far_plane=1e10,
            radius_clip=0.0, sparse_grad=False, distributed=False, camera_model="pinhole",
            with_ut=False, with_eval3d=False, **kw)

    def full_loss():
        with torch.no_grad():
            return float((render(slice(None))[0] - gt).abs().mean())

    before = full_loss()
    for step in range(10):
        c = slice(step % 3, step % 3 + 1)
        renders, _, info = render(c, packed=False, absgrad=True, rasterize_mode="antialiased",
                                  render_mode="RGB+ED", backgrounds=torch.zeros(1, 3))
        colors_out, depths = renders[..., :3], renders[..., 3:4]
        info["means2d"].retain_grad()  # DefaultStrategy.step_pre_backward
        loss = (colors_out - gt[c]).abs().mean()
        loss.backward()
        assert info["means2d"].absgrad.shape == info["means2d"].shape
        assert info["means2d"].grad.abs().sum() > 0
        assert depths.shape == (1, H, W, 1)
        opt.step()
        opt.zero_grad(set_to_none=True)
    after = full_loss()
    assert after < 0.6 * before
