"""CUDA binning and rasterization against the CPU backend (the CPU is itself tested against the
float64 reference): identical binning, forward within float tolerance, backward by cosine
similarity (float32) or tight tolerance (float64), both modes, any channel count."""
from __future__ import annotations

import math

import pytest
import torch

import gsrender
from gsrender import ops, synthetic
from gsrender import reference as ref

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

F32, F64 = torch.float32, torch.float64
WP = [0.05, 1.0, 1e-3]  # weighted mode's (sigma, beta, w_bg)


def _screen_scene(seed: int, dtype, C=2, N=300, width=53, height=37, D=4, ties=True):
    """Projected Gaussians as project_fwd returns them (opacity-aware radii, some culled, some
    partly off-screen, exact depth ties), colors [C,N,D] and backgrounds [C,D]."""
    g = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.rand(*s, generator=g, dtype=F64)
    means2d = rnd(C, N, 2) * torch.tensor([width + 16.0, height + 16.0], dtype=F64) - 8.0
    sx, sy = 0.4 + 5.0 * rnd(C, N), 0.4 + 5.0 * rnd(C, N)
    rho = (rnd(C, N) - 0.5) * 1.6
    cxx, cyy, cxy = sx * sx + 0.3, sy * sy + 0.3, rho * sx * sy
    det = cxx * cyy - cxy * cxy
    conics = torch.stack([cyy / det, -cxy / det, cxx / det], -1)
    opac = 0.02 + 0.97 * rnd(C, N)
    k = ref.support_radius_factor(opac)
    radii = torch.stack([torch.ceil(k * cxx.sqrt()), torch.ceil(k * cyy.sqrt())], -1).to(torch.int32)
    depths = 0.5 + 10.0 * rnd(C, N)
    if ties:
        depths[:, 10:40] = depths[:, 5:6]  # exact ties: Gaussian order must decide
    culled = rnd(C, N) < 0.1
    radii[culled] = 0
    for t in (means2d, conics, opac, depths):
        t[culled] = 0
    colors = rnd(C, N, D) * 2.0 - 0.5
    bg = rnd(C, D)
    cast = lambda t: t.to(dtype)
    return {"means2d": cast(means2d), "conics": cast(conics), "opacities": cast(opac),
            "depths": cast(depths), "radii": radii, "colors": cast(colors),
            "backgrounds": cast(bg), "width": width, "height": height}


def _to(s: dict, device) -> dict:
    return {k: v.to(device) if torch.is_tensor(v) else v for k, v in s.items()}


def _bin(s, tile_size, sort):
    return ops.bin_tiles(s["means2d"], s["radii"], s["depths"], s["width"], s["height"],
                         tile_size, sort)


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().flatten(), b.double().flatten()
    na, nb = a.norm(), b.norm()
    if na == 0 and nb == 0:
        return 1.0
    return float(a @ b / (na * nb).clamp_min(1e-300))


# ------------------------------------------------------------------------------------ binning


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize("tile_size", [16, 7, 32])
def test_bin_tiles_matches_cpu(dtype, sort, tile_size):
    s = _screen_scene(1, dtype)
    off_cpu, ids_cpu = _bin(s, tile_size, sort)
    off_gpu, ids_gpu = _bin(_to(s, "cuda"), tile_size, sort)
    assert off_gpu.dtype == torch.int32 and ids_gpu.dtype == torch.int32
    assert torch.equal(off_gpu.cpu(), off_cpu)
    assert torch.equal(ids_gpu.cpu(), ids_cpu)


def test_bin_tiles_empty_and_all_culled():
    s = _screen_scene(2, F32, N=5)
    s["radii"].zero_()
    off, ids = _bin(_to(s, "cuda"), 16, True)
    assert ids.numel() == 0 and int(off.abs().sum()) == 0
    e = _screen_scene(2, F32, N=0)
    off, ids = _bin(_to(e, "cuda"), 16, True)
    assert ids.numel() == 0 and off.shape == (2, 3, 4)


# ------------------------------------------------------------------------------ rasterization


def _raster(s, tile_size, mode, bg, precision="fp32", grad_seed=None):
    sort = mode == ops.SORTED
    off, ids = _bin(s, tile_size, sort)
    leaves = {k: s[k].clone().requires_grad_(grad_seed is not None)
              for k in ("means2d", "conics", "opacities", "colors", "depths", "backgrounds")}
    out = ops.rasterize(leaves["means2d"], leaves["conics"], leaves["opacities"],
                        leaves["colors"], leaves["depths"], leaves["backgrounds"] if bg else None,
                        off, ids, s["width"], s["height"], tile_size, mode, WP, precision)
    grads = None
    if grad_seed is not None:
        render, alphas = out[0], out[1]
        g = torch.Generator().manual_seed(grad_seed)
        v_r = torch.randn(render.shape, generator=g, dtype=F64).to(render)
        v_a = torch.randn(alphas.shape, generator=g, dtype=F64).to(alphas)
        ((render * v_r).sum() + (alphas * v_a).sum()).backward()
        grads = {k: (v.grad if v.grad is not None else torch.zeros_like(v)).detach().cpu()
                 for k, v in leaves.items()}
    return [o.detach().cpu() for o in out], grads


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("mode", [ops.SORTED, ops.WEIGHTED])
@pytest.mark.parametrize("D", [1, 3, 16, 64, 255, 512])
def test_rasterize_matches_cpu(dtype, mode, D):
    s = _screen_scene(10 + D, dtype, N=200 if D > 64 else 300, D=D)
    bg = D != 16  # one run without backgrounds
    (r_c, a_c, l_c, x_c, st_c, _), g_c = _raster(s, 16, mode, bg, "auto", grad_seed=5)
    (r_g, a_g, l_g, x_g, st_g, _), g_g = _raster(_to(s, "cuda"), 16, mode, bg, "fp32",
                                                      grad_seed=5)
    if dtype == F64:
        torch.testing.assert_close(r_g, r_c, rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(a_g, a_c, rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(x_g, x_c, rtol=1e-9, atol=1e-9)
        assert torch.equal(l_g, l_c)
        assert torch.equal(st_g[:, 2], st_c[:, 2])  # contributing pairs
        for k in g_c:
            torch.testing.assert_close(g_g[k], g_c[k], rtol=1e-6, atol=1e-8, msg=k)
    else:
        # A pair whose α sits within float rounding of 1/255 (or a pixel at the 1e-4 stop) may
        # flip between backends; allow it on a vanishing fraction of values.
        err = (r_g - r_c).abs()
        assert float((err > 1e-4).double().mean()) < 1e-3, float(err.max())
        assert float((a_g - a_c).abs().max()) < 1e-3
        assert float((l_g != l_c).double().mean()) < 1e-3
        rel_useful = (st_g[:, 2] - st_c[:, 2]).abs().double() / st_c[:, 2].clamp_min(1)
        assert float(rel_useful.max()) < 1e-3
        for k in g_c:
            if k == "depths" and mode == ops.SORTED:
                assert float(g_g[k].abs().max()) == 0.0
                continue
            if k == "backgrounds" and not bg:
                continue
            assert _cos(g_g[k], g_c[k]) >= 0.999, k
    assert bool((st_g[:, 0] >= st_g[:, 1]).all()) and bool((st_g[:, 1] >= st_g[:, 2]).all())


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = float((a.double() - b.double()).square().mean())
    return math.inf if mse == 0 else -10.0 * math.log10(mse)


# Tensor Core kernel (float32, 16×16 tiles, sm_80+) vs the CPU: fp16 must keep RGB at ≥ 50 dB and
# features at cosine ≥ 0.9999; bf16 has 8 mantissa bits, so its bars are lower.
MMA_BARS = {"fp16": (50.0, 0.9999), "tf32": (50.0, 0.9999), "bf16": (38.0, 0.999)}


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] < 8,
                    reason="the Tensor Core kernel needs sm_80+")
@pytest.mark.parametrize("precision", list(MMA_BARS))
@pytest.mark.parametrize("mode", [ops.SORTED, ops.WEIGHTED])
@pytest.mark.parametrize("D", [1, 3, 16, 64, 255, 512])
def test_mma_rasterize_matches_cpu(precision, mode, D):
    s = _screen_scene(40 + D, F32, N=200 if D > 64 else 300, D=D)
    (r_c, a_c, l_c, x_c, st_c, _), g_c = _raster(s, 16, mode, True, "auto", grad_seed=7)
    (r_g, a_g, l_g, x_g, st_g, plan_g), g_g = _raster(_to(s, "cuda"), 16, mode, True, precision,
                                                      grad_seed=7)
    # the plan ran the Tensor Cores of that operand type, and their backward where one exists
    mma = "mma_" + precision.replace("fp", "f")
    info = ops.plan_info(plan_g)
    assert (info["forward"], info["backward"]) == (mma, "scalar" if precision == "tf32" else mma)
    # the Tensor Core forward (and backward) workspace: at least the converted colour rows
    assert info["forward_workspace"] >= 2 * s["colors"].numel()
    assert (info["backward_workspace"] > 0) == (precision != "tf32")
    psnr_bar, cos_bar = MMA_BARS[precision]
    rgb = slice(0, min(D, 3))
    assert _psnr(r_g[..., rgb], r_c[..., rgb]) >= psnr_bar
    assert _cos(r_g, r_c) >= cos_bar
    # α, T and the stop are computed in fp32 from the same formula: only rounding-level flips
    assert float((a_g - a_c).abs().max()) < 1e-3
    assert float(((x_g - x_c).abs() / x_c.abs().clamp_min(1.0)).max()) < 1e-3  # T_final / Σw
    assert float((l_g != l_c).double().mean()) < 1e-3
    rel_useful = (st_g[:, 2] - st_c[:, 2]).abs().double() / st_c[:, 2].clamp_min(1)
    assert float(rel_useful.max()) < 1e-3
    # packing: every contributing pair was computed, and the packed work is a real subset of
    # the tile lists (packing efficiency = useful / computed in (0, 1])
    assert bool((st_g[:, 1] >= st_g[:, 2]).all()) and bool((st_g[:, 2] > 0).all())
    for k in g_c:  # the backward is exact fp32 whatever the forward's operands
        if k == "depths" and mode == ops.SORTED:
            continue
        assert _cos(g_g[k], g_c[k]) >= 0.999, k


def test_mma_partial_tiles_and_empty_lists():
    # an image that is not a multiple of 16 and a tile list with gaps: pixels outside the image
    # are never written, tiles without Gaussians give the background
    s = _screen_scene(77, F32, N=40, width=37, height=21, D=5)
    (r_c, a_c, *_), _ = _raster(s, 16, ops.SORTED, True, "auto")
    (r_g, a_g, *_), _ = _raster(_to(s, "cuda"), 16, ops.SORTED, True, "auto")
    assert _psnr(r_g, r_c) >= 50.0
    assert float((a_g - a_c).abs().max()) < 1e-3


def test_mma_channels_beyond_fp16_range():
    # far depths / large features (≫ 65504) must neither overflow the fp16 operands nor lose
    # relative precision: the kernel scales each channel by its max |value|
    s = _screen_scene(88, F32, D=4)
    s["colors"][..., 3] = s["depths"] * 1e5  # depth-like channel up to ~1e6
    s["colors"][..., 0] *= 1e-4              # and a tiny one
    (r_c, *_), _ = _raster(s, 16, ops.SORTED, False, "auto")
    (r_g, *_), _ = _raster(_to(s, "cuda"), 16, ops.SORTED, False, "auto")
    assert bool(torch.isfinite(r_g).all())
    for ch in range(4):
        assert _cos(r_g[..., ch], r_c[..., ch]) >= 0.9999, ch


@pytest.mark.parametrize("tile_size", [8, 5, 13])
def test_rasterize_other_tile_sizes(tile_size):
    s = _screen_scene(3, F64, D=4)
    (r_c, a_c, *_), g_c = _raster(s, tile_size, ops.SORTED, True, grad_seed=1)
    (r_g, a_g, *_), g_g = _raster(_to(s, "cuda"), tile_size, ops.SORTED, True, grad_seed=1)
    torch.testing.assert_close(r_g, r_c, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(a_g, a_c, rtol=1e-9, atol=1e-9)
    for k in g_c:
        torch.testing.assert_close(g_g[k], g_c[k], rtol=1e-6, atol=1e-8, msg=k)


def test_rasterize_bad_inputs():
    s = _to(_screen_scene(4, F32), "cuda")
    off, ids = _bin(s, 16, True)
    args = lambda o, i, ts=16: (s["means2d"], s["conics"], s["opacities"], s["colors"],
                                s["depths"], None, o, i, s["width"], s["height"], ts,
                                ops.SORTED, WP, "fp32")
    with pytest.raises(ValueError, match="tile_size"):
        off32, ids32 = _bin(s, 32, True)
        ops.rasterize(*args(off32, ids32, 32))
    bad = ids.clone()
    bad[0] = 10**6
    with pytest.raises(ValueError, match="flatten_ids"):
        ops.rasterize(*args(off, bad))
    bad_off = off.clone()
    bad_off.view(-1)[0] = ids.numel() + 5
    with pytest.raises(ValueError, match="tile_offsets"):
        ops.rasterize(*args(bad_off, ids))


# ------------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("precision", ["fp32", "auto"])
@pytest.mark.parametrize("mode", ["sorted", "weighted"])
def test_render_end_to_end(mode, precision):
    scene = synthetic.make_scene(3000, feature_dim=16, seed=0)
    viewmats, Ks = synthetic.orbit_cameras(2, radius=6.0, height=2.5, width=96, height_px=72)
    viewmats, Ks = viewmats.float(), Ks.float()

    def run(device):
        sc = scene.to(device)
        leaves = [t.clone().requires_grad_(True)
                  for t in (sc.means, sc.quats, sc.scales, sc.opacities, sc.sh, sc.features)]
        out = gsrender.rasterize(*leaves[:4], leaves[4], viewmats.to(device), Ks.to(device), 96,
                                 72, sh_degree=scene.sh_degree, features=leaves[5], mode=mode,
                                 backgrounds=torch.tensor([0.2, 0.3, 0.4], device=device),
                                 backend=device, precision=precision)
        loss = out.colors.square().sum() + out.features.sum() + out.depths.sum() + out.alphas.sum()
        loss.backward()
        return out, [t.grad.detach().cpu() for t in leaves]

    o_c, g_c = run("cpu")
    o_g, g_g = run("cuda")
    if precision == "fp32":  # the exact scalar kernel
        for name in ("colors", "alphas", "features"):
            a, b = getattr(o_g, name).detach().cpu(), getattr(o_c, name).detach()
            assert float(((a - b).abs() > 1e-3).double().mean()) < 1e-3, name
        d = (o_g.depths.detach().cpu() - o_c.depths.detach()).abs()
        assert float((d > 1e-3 * max(1.0, float(o_c.depths.abs().max()))).double().mean()) < 1e-3
    else:  # Tensor Cores, fp16 operands
        assert _psnr(o_g.colors.detach().cpu(), o_c.colors.detach()) >= 50.0
        assert _cos(o_g.features.detach().cpu(), o_c.features.detach()) >= 0.9999
        assert _cos(o_g.depths.detach().cpu(), o_c.depths.detach()) >= 0.9999
    for name, a, b in zip(("means", "quats", "scales", "opacities", "sh", "features"), g_g, g_c):
        assert math.isfinite(float(a.abs().sum())), name
        assert _cos(a, b) >= 0.999, name
