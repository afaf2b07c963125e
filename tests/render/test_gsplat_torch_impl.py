"""gsrender's projection and SH against gsplat's own pure-PyTorch implementations
(gsplat.cuda._torch_impl, gsplat 1.5.3; importable without a GPU), for the pinhole, ortho and
fisheye camera models. Skipped when gsplat is absent.

Documented difference: gsrender's radii are opacity-aware (k = sqrt(2 ln(255·o)) instead of gsplat's
3.33, docs/design.md §3 "Support"), and it culls Gaussians with o2d < 1/255 or whose tighter box is off
screen. So radii are compared with that rule evaluated on gsplat's cov2d, and gsplat's are an upper
bound; every other output is compared directly on the Gaussians gsrender keeps.
"""
from __future__ import annotations

import math

import pytest
import torch

from gsrender import ops
from gsrender import reference as ref
from gsrender import synthetic as S
from gsrender.contract import ALPHA_MIN

try:
    from gsplat.cuda import _torch_impl as G
except Exception as e:  # noqa: BLE001 - any import failure (no gsplat, a broken install) skips
    pytest.skip(f"gsplat's pure-PyTorch functions are not importable ({e})", allow_module_level=True)

W, H = 80, 60
EPS2D, NEAR, FAR = 0.3, 0.01, 1e10


def _inputs(dtype, sh_degree=3):
    m = S.make_scene(800, n_objects=3, seed=5, sh_degree=sh_degree)
    vms, Ks = S.orbit_cameras(3, 3.5, 1.2, width=W, height_px=H)
    Ks[1, 0, 2] += 9.0  # an off-centre principal point and non-square pixels
    Ks[2, 1, 1] *= 1.2
    # Gaussians partly off screen and up to very large ones, so clamping and culling are exercised
    scales = m.scales * torch.exp(torch.linspace(-1.0, 2.5, m.num_gaussians))[:, None]
    opac = torch.linspace(1e-3, 0.999, m.num_gaussians)
    quats = m.quats * 3.0  # unnormalised: both normalise inside
    return [t.to(dtype) for t in (m.means, quats, scales, opac, vms, Ks, m.sh)]


def _theirs(means, quats, scales, vms, Ks, camera_model="pinhole"):
    covars, _ = G._quat_scale_to_covar_preci(quats, scales, compute_preci=False)
    return G._fully_fused_projection(means, covars, vms, Ks, W, H, eps2d=EPS2D, near_plane=NEAR,
                                     far_plane=FAR, calc_compensations=True,
                                     camera_model=camera_model)


@pytest.mark.parametrize("antialiased", [False, True])
def test_projection_matches_gsplat_torch_impl(antialiased):
    means, quats, scales, opac, vms, Ks, _ = _inputs(torch.float64)
    radii, means2d, depths, conics, opac2d = ops.project(
        means, quats, scales, opac, vms, Ks, W, H, EPS2D, NEAR, FAR, 0.0, antialiased)
    g_radii, g_means2d, g_depths, g_conics, g_comp = _theirs(means, quats, scales, vms, Ks)

    # gsrender's rule (docs/design.md §3) evaluated on gsplat's cov2d (the inverse of its conic)
    a, b, c = g_conics.unbind(-1)
    det_inv = a * c - b * b
    cov_xx, cov_yy = c / det_inv, a / det_inv
    o2d = opac * g_comp if antialiased else opac.expand_as(a)
    k = ref.support_radius_factor(o2d)
    rx, ry = torch.ceil(k * cov_xx.sqrt()), torch.ceil(k * cov_yy.sqrt())
    mx, my = g_means2d.unbind(-1)
    want = ((g_radii > 0).all(-1) & (o2d >= ALPHA_MIN) & ((rx > 0) | (ry > 0))
            & (mx + rx > 0) & (mx - rx < W) & (my + ry > 0) & (my - ry < H))
    vis = (radii > 0).all(-1)  # [C, N]
    assert torch.equal(vis, want)
    assert 0 < int(vis.sum()) < vis.numel()  # some culled, some kept
    assert int(((g_radii > 0).all(-1) & ~vis).sum()) > 0  # the opacity-aware rule did cull some

    torch.testing.assert_close(radii[vis].double(), torch.stack([rx, ry], -1)[vis], rtol=0, atol=0)
    assert (radii[vis] <= g_radii[vis]).all()  # gsplat's 3.33σ box bounds ours
    torch.testing.assert_close(means2d[vis], g_means2d[vis], rtol=1e-10, atol=1e-9)
    torch.testing.assert_close(depths[vis], g_depths[vis], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(conics[vis], g_conics[vis], rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(opac2d[vis], o2d[vis], rtol=1e-10, atol=1e-12)
    # culled Gaussians are zeroed (gsplat leaves them as computed)
    assert (radii[~vis] == 0).all() and (means2d[~vis] == 0).all() and (opac2d[~vis] == 0).all()


def test_projection_float32_close_to_gsplat():
    means, quats, scales, opac, vms, Ks, _ = _inputs(torch.float32)
    radii, means2d, depths, conics, _ = ops.project(means, quats, scales, opac, vms, Ks, W, H, EPS2D,
                                                    NEAR, FAR, 0.0, False)
    g_radii, g_means2d, g_depths, g_conics, _ = _theirs(means, quats, scales, vms, Ks)
    vis = (radii > 0).all(-1)
    assert ((g_radii > 0).all(-1) | ~vis).all()  # gsrender keeps a subset of gsplat's Gaussians
    torch.testing.assert_close(means2d[vis], g_means2d[vis], rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(depths[vis], g_depths[vis])
    torch.testing.assert_close(conics[vis], g_conics[vis], rtol=1e-4, atol=1e-6)
    # ceil() may round the other way when float32 errors straddle an integer: at most 1 px
    assert (radii[vis] <= g_radii[vis] + 1).all()


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_sh_matches_gsplat_torch_impl(degree):
    means, _, _, _, vms, _, coeffs = _inputs(torch.float64, sh_degree=3)
    campos = -torch.einsum("cji,cj->ci", vms[:, :3, :3], vms[:, :3, 3])  # [C, 3]
    dirs = means[None] - campos[:, None]  # [C, N, 3], unnormalised: both normalise
    ours = ops.sh(degree, dirs.contiguous(), coeffs.contiguous())  # [C, N, 3]
    theirs = G._spherical_harmonics(degree, dirs, coeffs.expand(dirs.shape[0], *coeffs.shape))
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    assert math.isfinite(float(ours.abs().max()))


# gsplat's _fisheye_proj adds eps = 1e-7 to r and x² (so the axis has no 0/0): its means2d and J
# differ from the exact map by about 1e-7/r relative; ortho is exact on both sides.
MODEL_TOL = {"ortho": dict(rtol=1e-10, atol=1e-9), "fisheye": dict(rtol=1e-5, atol=1e-5)}


@pytest.mark.parametrize("model", ["ortho", "fisheye"])
def test_camera_models_match_gsplat_torch_impl(model):
    means, quats, scales, opac, vms, Ks, _ = _inputs(torch.float64)
    if model == "ortho":
        Ks[:, :2, :2] *= 0.08  # pixels per world unit: the scene spans the image
    else:
        Ks[:, :2, :2] *= 0.3  # a wide fisheye
    radii, means2d, depths, conics, opac2d = ops.project(
        means, quats, scales, opac, vms, Ks, W, H, EPS2D, NEAR, FAR, 0.0, True, model)
    g_radii, g_means2d, g_depths, g_conics, g_comp = _theirs(means, quats, scales, vms, Ks, model)
    vis = (radii > 0).all(-1)
    assert int(vis.sum()) > 100
    assert ((g_radii > 0).all(-1) | ~vis).all()  # gsrender keeps a subset of gsplat's Gaussians
    tol = MODEL_TOL[model]
    torch.testing.assert_close(means2d[vis], g_means2d[vis], **tol)
    torch.testing.assert_close(depths[vis], g_depths[vis], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(conics[vis], g_conics[vis], **tol)
    torch.testing.assert_close(opac2d[vis], (opac * g_comp)[vis], **tol)
