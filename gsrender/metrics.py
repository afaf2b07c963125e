"""Image quality metrics shared by the trainer, the benchmarks and the applications.

Images are channel-last, as the renderer returns them: [..., H, W, CH] with values in [0, 1].
`ssim` is differentiable (the trainer uses 1 − SSIM as a loss); `psnr` returns a float.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from gsrender import ops

SSIM_WINDOW = 11  # the Gaussian window of Wang et al. 2004, as the 3DGS code and papers use it
SSIM_SIGMA = 1.5
SSIM_C1 = 0.01**2
SSIM_C2 = 0.03**2


def _check_pair(img: torch.Tensor, target: torch.Tensor) -> None:
    if not isinstance(img, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise TypeError("img and target must be torch.Tensors")
    if img.shape != target.shape:
        raise ValueError(f"img {tuple(img.shape)} and target {tuple(target.shape)} must have the same shape")
    if img.dim() < 3:
        raise ValueError(f"img must be [..., H, W, CH], got {tuple(img.shape)}")


def mse(img: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    _check_pair(img, target)
    return ((img - target) ** 2).mean()


def psnr(img: torch.Tensor, target: torch.Tensor) -> float:
    """Peak signal-to-noise ratio in dB for images in [0, 1] (mean over all pixels and channels)."""
    _check_pair(img, target)
    # squared error accumulated in float64 (no float64 copies of the images: the trainer calls
    # this every step)
    err = float(((img.detach() - target.detach()) ** 2).mean(dtype=torch.float64))
    return float("inf") if err == 0.0 else -10.0 * torch.log10(torch.tensor(err)).item()


def _window(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    x = torch.arange(SSIM_WINDOW, dtype=dtype, device=device) - (SSIM_WINDOW - 1) / 2
    g = torch.exp(-(x**2) / (2 * SSIM_SIGMA**2))
    return g / g.sum()  # [WIN] separable 1D window


def _blur(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    # x: [B, CH, H, W]; depthwise separable filter with zero padding ("same" size, like 3DGS)
    ch = x.shape[1]
    pad = SSIM_WINDOW // 2
    x = F.conv2d(x, g.view(1, 1, 1, -1).expand(ch, 1, 1, -1), padding=(0, pad), groups=ch)
    return F.conv2d(x, g.view(1, 1, -1, 1).expand(ch, 1, -1, 1), padding=(pad, 0), groups=ch)


def ssim_map(img: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-pixel SSIM [..., H, W, CH] (11×11 Gaussian window, σ = 1.5, zero padding).

    On the CPU the extension's fused kernel (ops.ssim_map: several times faster than the
    depthwise convolutions and elementwise ops there); elsewhere the same formula in tensor ops."""
    _check_pair(img, target)
    lead = img.shape[:-3]
    h, w, ch = img.shape[-3:]
    g = _window(img.dtype, img.device)
    if img.device.type == "cpu" and img.dtype in (torch.float32, torch.float64):
        s = ops.ssim_map(img.reshape(-1, h, w, ch), target.reshape(-1, h, w, ch), g, SSIM_C1,
                         SSIM_C2)
        return s.reshape(*lead, h, w, ch)
    x = img.reshape(-1, h, w, ch).permute(0, 3, 1, 2)  # [B, CH, H, W]
    y = target.reshape(-1, h, w, ch).permute(0, 3, 1, 2)
    return _ssim_map_tensor_ops(x, y, g).permute(0, 2, 3, 1).reshape(*lead, h, w, ch)


def _ssim_map_tensor_ops(x: torch.Tensor, y: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """SSIM [B, CH, H, W] of x, y [B, CH, H, W] by convolutions and elementwise tensor ops."""
    mu_x, mu_y = _blur(x, g), _blur(y, g)
    var_x = _blur(x * x, g) - mu_x**2
    var_y = _blur(y * y, g) - mu_y**2
    cov = _blur(x * y, g) - mu_x * mu_y
    num = (2 * mu_x * mu_y + SSIM_C1) * (2 * cov + SSIM_C2)
    den = (mu_x**2 + mu_y**2 + SSIM_C1) * (var_x + var_y + SSIM_C2)
    return num / den


def ssim(img: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean SSIM as a differentiable scalar tensor."""
    return ssim_map(img, target).mean()
