"""PSNR and SSIM (gsrender.metrics) on cases with closed-form answers."""
from __future__ import annotations

import math

import pytest
import torch

from gsrender import metrics


def test_psnr_known_error():
    a = torch.zeros(2, 8, 8, 3)
    b = torch.full_like(a, 0.1)  # MSE = 0.01 -> 20 dB
    assert metrics.psnr(a, b) == pytest.approx(20.0, abs=1e-9)
    assert metrics.psnr(a, a) == math.inf


def test_ssim_identical_is_one_and_noise_lowers_it():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(1, 32, 40, 3, generator=g, dtype=torch.float64)
    assert float(metrics.ssim(x, x)) == pytest.approx(1.0, abs=1e-12)
    small = float(metrics.ssim(x, (x + 0.02 * torch.randn(x.shape, generator=g, dtype=x.dtype)).clamp(0, 1)))
    large = float(metrics.ssim(x, (x + 0.2 * torch.randn(x.shape, generator=g, dtype=x.dtype)).clamp(0, 1)))
    assert 1.0 > small > large


def test_ssim_constant_images_closed_form():
    # Away from the zero-padded border, two constant images a, b have var = cov = 0, so
    # SSIM = (2ab + C1) / (a^2 + b^2 + C1).
    a, b = 0.3, 0.7
    x = torch.full((24, 24, 1), a, dtype=torch.float64)
    y = torch.full((24, 24, 1), b, dtype=torch.float64)
    inner = metrics.ssim_map(x, y)[6:-6, 6:-6]
    expect = (2 * a * b + metrics.SSIM_C1) / (a * a + b * b + metrics.SSIM_C1)
    torch.testing.assert_close(inner, torch.full_like(inner, expect))


def test_ssim_is_differentiable():
    x = torch.rand(16, 16, 3, dtype=torch.float64, requires_grad=True)
    y = torch.rand(16, 16, 3, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda t: metrics.ssim(t, y), (x,))


def test_bad_shapes_name_the_arguments():
    with pytest.raises(ValueError, match="img"):
        metrics.psnr(torch.zeros(4, 4, 3), torch.zeros(4, 5, 3))
    with pytest.raises(TypeError, match="target"):
        metrics.ssim(torch.zeros(4, 4, 3), None)
