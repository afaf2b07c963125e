"""The fused CPU SSIM kernel (ops.ssim_map, used by metrics.ssim on the CPU) against the same
formula in convolutions and tensor ops, its gradient by gradcheck, and torch.library.opcheck."""
from __future__ import annotations

import pytest
import torch

from gsrender import metrics, ops
from tests.conftest import every_cpu_isa

C1, C2 = metrics.SSIM_C1, metrics.SSIM_C2


def _expected(x, y, g):
    """SSIM [B, H, W, CH] of images x, y by F.conv2d and tensor ops (metrics' non-CPU path)."""
    planar = (0, 3, 1, 2)
    return metrics._ssim_map_tensor_ops(x.permute(planar), y.permute(planar), g).permute(0, 2, 3, 1)


# images [B, H, W, CH] smaller than the window, of one band, of several 64-row bands with a
# ragged last one
SIZES = [(1, 3, 4, 1), (2, 17, 23, 3), (1, 150, 37, 2)]


@every_cpu_isa
@pytest.mark.parametrize("shape", SIZES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ssim_kernel_matches_tensor_ops(shape, dtype):
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(shape, generator=gen, dtype=dtype)
    y = (x + 0.1 * torch.randn(shape, generator=gen, dtype=dtype)).clamp(0, 1)
    g = metrics._window(dtype, x.device)
    tol = {"rtol": 1e-5, "atol": 2e-6} if dtype == torch.float32 else {"rtol": 1e-11, "atol": 1e-12}
    torch.testing.assert_close(ops.ssim_map(x, y, g, C1, C2), _expected(x, y, g), **tol)


@every_cpu_isa
def test_ssim_kernel_gradients_match_tensor_ops_in_float32():
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(2, 70, 41, 3, generator=gen, requires_grad=True)
    y = torch.rand(2, 70, 41, 3, generator=gen, requires_grad=True)
    v = torch.randn(2, 70, 41, 3, generator=gen)
    g = metrics._window(torch.float32, x.device)
    got = torch.autograd.grad((ops.ssim_map(x, y, g, C1, C2) * v).sum(), (x, y))
    want = torch.autograd.grad((_expected(x, y, g) * v).sum(), (x, y))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_ssim_kernel_gradcheck_with_an_asymmetric_window():
    # an asymmetric window catches a backward blur that is not the reversed (adjoint) one
    gen = torch.Generator().manual_seed(2)
    x = torch.rand(2, 13, 9, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    y = torch.rand(2, 13, 9, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    g = torch.rand(5, generator=gen, dtype=torch.float64)
    g = g / g.sum()
    assert torch.autograd.gradcheck(lambda a, b: ops.ssim_map(a, b, g, C1, C2), (x, y))
    only_x = torch.autograd.gradcheck(lambda a: ops.ssim_map(a, y.detach(), g, C1, C2), (x,))
    assert only_x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_ssim_fwd(dtype):
    gen = torch.Generator().manual_seed(3)
    x = torch.rand(2, 20, 13, 3, generator=gen, dtype=dtype, requires_grad=True)
    y = torch.rand(2, 20, 13, 3, generator=gen, dtype=dtype)
    res = torch.library.opcheck(torch.ops.gsrender.ssim_fwd,
                                (x, y, metrics._window(dtype, x.device), C1, C2))
    assert all(v == "SUCCESS" for v in res.values()), res


def test_metrics_ssim_runs_the_kernel_on_the_cpu(monkeypatch):
    calls = []
    kernel = ops.ssim_map
    monkeypatch.setattr(ops, "ssim_map", lambda *a: calls.append(1) or kernel(*a))
    img = torch.rand(2, 16, 12, 3)
    float(metrics.ssim(img, img.flip(1)))
    assert calls == [1]


def test_bad_inputs_name_the_argument():
    x = torch.rand(2, 8, 8, 3)
    g = torch.ones(3) / 3
    with pytest.raises(ValueError, match="x must have shape"):
        ops.ssim_map(x[0], x[0], g, C1, C2)
    with pytest.raises(ValueError, match="y must have shape"):
        ops.ssim_map(x, x[:, :4], g, C1, C2)
    with pytest.raises(ValueError, match="y must have shape"):
        ops.ssim_map(x, x[..., :1], g, C1, C2)
    with pytest.raises(ValueError, match="window must have an odd length"):
        ops.ssim_map(x, x, torch.ones(4), C1, C2)
    with pytest.raises(TypeError, match="window must have the dtype of x"):
        ops.ssim_map(x, x, g.double(), C1, C2)
    with pytest.raises(TypeError, match="x must be float32 or float64"):
        ops.ssim_map(x.half(), x.half(), g.half(), C1, C2)
