"""sh_channels_fwd / _bwd (CPU): the raster's channels — the 3DGS colour clamp_min(SH(means −
campos) + 0.5, 0), the depth, the features — in one pass, as gsrender.rasterize builds them.

The oracle is gsrender.reference (float64) for the colour; the depth and feature channels are
copies of their inputs. Backwards are compared against torch.autograd through the reference and
gradchecked by finite differences.
"""
from __future__ import annotations

import pytest
import torch

from gsrender import (
    _C,  # noqa: F401  (registers torch.ops.gsrender.*)
    ops,
)
from gsrender import reference as ref
from tests.conftest import every_cpu_isa

OPS = torch.ops.gsrender
F64 = torch.float64


def _case(seed: int, degree: int, C: int = 2, N: int = 40, D: int | None = 5, per_camera=False,
          dtype=F64):
    """means [N,3] around the origin, cameras near (0, 0, −4); coeffs wide enough that many colours
    clamp at 0; depths [C,N]; features [N,D] or [C,N,D] (per_camera) or None."""
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(N, 3, generator=g, dtype=F64)
    vm = torch.eye(4, dtype=F64).repeat(C, 1, 1)
    vm[:, :3, 3] = torch.tensor([0.0, 0.0, 4.0], dtype=F64) + 0.3 * torch.randn(C, 3, generator=g, dtype=F64)
    coeffs = torch.randn(N, 16, 3, generator=g, dtype=F64)
    depths = 4 + torch.rand(C, N, generator=g, dtype=F64)
    feats = None
    if D is not None:
        feats = torch.randn(*((C, N, D) if per_camera else (N, D)), generator=g, dtype=F64)
    t = [means, vm, coeffs, depths, feats]
    return [x if x is None else x.to(dtype) for x in t]


def _campos(vm):
    return ref.camera_centers(vm)


def _want(degree, means, campos, coeffs, depths, feats):
    """The tensor ops gsrender.rasterize ran before the fused op (and runs on CUDA)."""
    dirs = means[None] - campos[:, None]
    rgb = torch.clamp_min(ref.sh_eval(degree, dirs, coeffs[None]) + 0.5, 0.0)
    chans = [rgb, depths[..., None]]
    if feats is not None:
        chans.append(feats.expand(campos.shape[0], *feats.shape) if feats.dim() == 2 else feats)
    return torch.cat(chans, dim=-1)


FEATURES = pytest.mark.parametrize("D,per_camera", [(None, False), (5, False), (3, True)],
                                   ids=["rgb", "shared", "per_camera"])


@every_cpu_isa
@pytest.mark.parametrize("degree", [0, 1, 2, 3])
@FEATURES
def test_channels_match_reference(degree, D, per_camera):
    means, vm, coeffs, depths, feats = _case(1, degree, D=D, per_camera=per_camera)
    campos = _campos(vm)
    got = ops.sh_channels(degree, means, campos, coeffs, depths, feats)
    want = _want(degree, means, campos, coeffs, depths, feats)
    assert got.shape == want.shape == (2, 40, 4 + (D or 0))
    torch.testing.assert_close(got[..., :3], want[..., :3], rtol=1e-12, atol=1e-12)
    assert torch.equal(got[..., 3:], want[..., 3:])  # depth and features: copies
    if degree > 0:
        assert (got[..., :3] == 0).float().mean() > 0.1, "the case should exercise the clamp"


@every_cpu_isa
@pytest.mark.parametrize("degree", [0, 1, 3])
@FEATURES
def test_backward_matches_autograd_of_reference(degree, D, per_camera):
    leaves = [x if x is None else x.clone().requires_grad_()
              for x in _case(2, degree, D=D, per_camera=per_camera)]
    means, vm, coeffs, depths, feats = leaves
    campos = _campos(vm).detach().requires_grad_()
    want = _want(degree, means, campos, coeffs, depths, feats)
    v = torch.randn(want.shape, generator=torch.Generator().manual_seed(3), dtype=F64)
    names = ["means", "campos", "coeffs", "depths"] + ([] if feats is None else ["features"])
    inputs = [means, campos, coeffs, depths] + ([] if feats is None else [feats])
    want_g = torch.autograd.grad(want, inputs, v, allow_unused=True)
    got = ops.sh_channels(degree, means, campos, coeffs, depths, feats)
    got_g = torch.autograd.grad(got, inputs, v, allow_unused=True)
    for name, w, g in zip(names, want_g, got_g):
        w = torch.zeros_like(g) if w is None else w  # degree 0: the colour ignores the direction
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12, msg=name)


@pytest.mark.parametrize("degree", [0, 2, 3])
@FEATURES
def test_gradcheck(degree, D, per_camera):
    means, vm, coeffs, depths, feats = _case(4, degree, N=5, D=D, per_camera=per_camera)
    campos = _campos(vm)
    inputs = [x.requires_grad_() for x in (means, campos, coeffs, depths)]
    if feats is None:
        fn = lambda m, p, c, d: ops.sh_channels(degree, m, p, c, d, None)
    else:
        inputs.append(feats.requires_grad_())
        fn = lambda m, p, c, d, f: ops.sh_channels(degree, m, p, c, d, f)
    assert torch.autograd.gradcheck(fn, tuple(inputs))


def test_float32_close_to_float64_and_zero_direction():
    means, vm, coeffs, depths, feats = _case(5, 3)
    campos = _campos(vm)
    means[0] = campos[0]  # a zero view direction: F.normalize's floor, not NaN
    want = _want(3, means, campos, coeffs, depths, feats)
    got = ops.sh_channels(3, *(x.float() for x in (means, campos, coeffs, depths, feats)))
    assert got.dtype == torch.float32 and torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


@every_cpu_isa
def test_float32_degree3_lanes_bitwise_the_tensor_ops():
    """Degree 3 in float runs 8 Gaussians per vector (csrc/cpu/sh_kernel.cpp: shifted_sh3_lanes), the
    rest one by one: both give the tensor ops' bits (sh_fwd's scalar sh_eval, + 0.5, clamp_min),
    also at a zero direction, huge coefficients (colours overflowing to Inf), and N not a multiple
    of 8. A NaN coefficient is refused (the kernel checks them: render.py leaves it that check)."""
    for N in (45, 8, 3):
        means, vm, coeffs, depths, feats = (x.float() for x in _case(6, 3, C=3, N=N, D=2))
        campos = _campos(vm.double()).float()
        means[0] = campos[1]  # a zero view direction in camera 1
        nan = coeffs.clone()
        nan[1, 5, 0] = float("nan")
        with pytest.raises(ValueError, match="coeffs .*contains NaN or Inf"):
            ops.sh_channels(3, means, campos, nan, depths, feats)
        coeffs[2, 9] = 3e38
        got = ops.sh_channels(3, means, campos, coeffs, depths, feats)
        want = torch.clamp_min(ops.sh(3, means[None] - campos[:, None], coeffs) + 0.5, 0.0)
        assert torch.equal(got[..., :3].isnan(), want.isnan())
        assert torch.equal(got[..., :3].nan_to_num(), want.nan_to_num())
        assert torch.equal(got[..., 3:], torch.cat([depths[..., None], feats.expand(3, N, 2)], -1))


@every_cpu_isa
def test_float32_degree3_backward_lanes_bitwise_the_scalar_kernel():
    """Degree 3 in float runs the backward 8 Gaussians per vector too (csrc/cpu/sh_kernel.cpp:
    shifted_sh3_bwd_lanes), the rest one by one: both give the bits of the tensor path's scalar
    kernel (sh_bwd's sh_eval_bwd under the clamp's mask, summed over cameras in camera order),
    also at a zero direction, a negative colour, NaN, and rows wider than degree 3 (K = 25)."""
    for N, C, K in ((45, 1, 16), (45, 3, 16), (8, 2, 25), (3, 1, 16)):
        means, vm, coeffs, _, _ = (x.float() for x in _case(6, 3, C=C, N=N, D=1))
        coeffs = torch.cat([coeffs, torch.randn(N, K - 16, 3)], 1)
        campos = _campos(vm.double()).float()
        means[0] = campos[-1]  # a zero view direction in the last camera
        coeffs[1, 5, 0] = float("nan")
        v = torch.randn(C, N, 4, generator=torch.Generator().manual_seed(N + C))
        v_means, v_campos, v_coeffs = OPS.sh_channels_bwd(3, means, campos, coeffs, v)
        dirs = (means[None] - campos[:, None]).contiguous()
        rgb = ops.sh(3, dirs, coeffs[:, :16]) + 0.5
        v_rgb = torch.where(rgb >= 0, v[..., :3], torch.zeros(()))
        v_dirs, want_coeffs = OPS.sh_bwd(3, dirs, coeffs[:, :16].contiguous(), v_rgb.contiguous())
        assert torch.equal(v_coeffs[:, :16].nan_to_num(), want_coeffs.nan_to_num())
        assert torch.equal(v_coeffs[:, :16].isnan(), want_coeffs.isnan())
        assert torch.equal(v_coeffs[:, 16:], torch.zeros(N, K - 16, 3))
        want_means = v_dirs[0].clone()
        for c in range(1, C):  # float adds in camera order, as the kernel's
            want_means += v_dirs[c]
        assert torch.equal(v_means.nan_to_num(), want_means.nan_to_num())
        torch.testing.assert_close(v_campos[~v_campos.isnan()],
                                   -v_dirs.double().sum(1).float()[~v_campos.isnan()])


def test_backward_independent_of_thread_count():
    means, vm, coeffs, _, _ = _case(6, 3, C=3, N=3000, D=None, dtype=torch.float32)
    campos = _campos(vm.double()).float()
    v = torch.randn(3, 3000, 4, generator=torch.Generator().manual_seed(7))
    threads = torch.get_num_threads()
    try:
        outs = []
        for n in (1, 2):
            torch.set_num_threads(n)
            outs.append(OPS.sh_channels_bwd(3, means, campos, coeffs, v))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*outs):
        assert torch.equal(a, b)  # fixed blocks, reduced in order: the same bits at any count


def test_bad_inputs_raise_named_errors():
    means, vm, coeffs, depths, feats = _case(8, 3)
    campos = _campos(vm)
    fwd = OPS.sh_channels_fwd
    with pytest.raises(ValueError, match="campos"):
        fwd(3, means, campos[:, :2], coeffs, depths, feats)
    with pytest.raises(ValueError, match="coeffs"):
        fwd(3, means, campos, coeffs[:, :9], depths, feats)
    with pytest.raises(ValueError, match="degree"):
        fwd(4, means, campos, coeffs, depths, feats)
    with pytest.raises(ValueError, match="depths"):
        fwd(3, means, campos, coeffs, depths[:1], feats)
    with pytest.raises(ValueError, match="features"):
        fwd(3, means, campos, coeffs, depths, feats[:3])
    with pytest.raises(TypeError, match="features"):
        fwd(3, means, campos, coeffs, depths, feats.float())
    with pytest.raises(ValueError, match="v_channels"):
        OPS.sh_channels_bwd(3, means, campos, coeffs, torch.zeros(2, 40, 2, dtype=F64))
