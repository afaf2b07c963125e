"""graphdeco-inria diff-gaussian-rasterization front door: ``GaussianRasterizationSettings`` and
``GaussianRasterizer`` with the original signatures, on top of gsrender.rasterize. Swap
``from diff_gaussian_rasterization import ...`` for ``from gsrender.compat.inria import ...``.

Camera: 3DGS passes viewmatrix = world_view_transform, the TRANSPOSE of the world-to-camera
matrix (row-vector convention), so viewmats = viewmatrix.T; intrinsics come from the FoV:
fx = W / (2 tanfovx), fy = H / (2 tanfovy), principal point at the image centre (W/2, H/2), which
is where 3DGS's ndc2Pix puts it in gsrender's pixel-centre convention. projmatrix and campos are
accepted but not needed (the view direction for SH comes from viewmatrix). Gaussians closer than
z = 0.2 are culled, like 3DGS's in_frustum test.

means2D gradient: after backward, means2D.grad[:, :2] holds ∂L/∂(NDC 2D mean) = ∂L/∂(pixel mean)
· (W/2, H/2), the quantity the original CUDA rasterizer writes, so 3DGS's densification threshold
(0.0002) keeps its meaning. It is filled by a tensor hook on the projected means (gsrender's
meta["means2d"]) that accumulates into means2D.grad; means2D itself takes no part in rendering.

Other differences: radii [N] are max(radius_x, radius_y) of gsrender's opacity-aware box
(docs/design.md §3), not 3σ; the optional depth (settings.return_depth truthy) is expected depth Σ w z [1,H,W],
not inverse depth; cov3D_precomp is not supported.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from gsrender.render import rasterize as _rasterize

NEAR_PLANE = 0.2  # 3DGS in_frustum: p_view.z <= 0.2 is culled


class GaussianRasterizationSettings(NamedTuple):
    image_height: int
    image_width: int
    tanfovx: float
    tanfovy: float
    bg: torch.Tensor
    scale_modifier: float
    viewmatrix: torch.Tensor
    projmatrix: torch.Tensor
    sh_degree: int
    campos: torch.Tensor
    prefiltered: bool
    debug: bool
    antialiasing: bool = False
    return_depth: bool = False


def camera_from_settings(s) -> tuple[torch.Tensor, torch.Tensor]:
    """(viewmats [1,4,4], Ks [1,3,3]) equivalent to the 3DGS settings' camera."""
    W, H = int(s.image_width), int(s.image_height)
    vm = s.viewmatrix.transpose(0, 1)  # row-vector world_view_transform -> world-to-camera
    fx, fy = W / (2.0 * float(s.tanfovx)), H / (2.0 * float(s.tanfovy))
    K = torch.tensor([[fx, 0.0, W / 2.0], [0.0, fy, H / 2.0], [0.0, 0.0, 1.0]],
                     dtype=vm.dtype, device=vm.device)
    return vm[None].contiguous(), K[None]


def _means2d_grad_hook(means2D: torch.Tensor, W: int, H: int):
    def hook(grad):  # grad [1, N, 2] in pixel units
        g = torch.zeros_like(means2D)  # [N, 2 or 3]
        g[:, 0] = grad[0, :, 0] * (0.5 * W)
        g[:, 1] = grad[0, :, 1] * (0.5 * H)
        means2D.grad = g if means2D.grad is None else means2D.grad + g
    return hook


class GaussianRasterizer(nn.Module):
    def __init__(self, raster_settings):
        super().__init__()
        self.raster_settings = raster_settings

    def markVisible(self, positions: torch.Tensor) -> torch.Tensor:
        """Bool [N]: in front of the camera's near plane (3DGS's frustum test, depth part)."""
        with torch.no_grad():
            vm, _ = camera_from_settings(self.raster_settings)
            z = positions @ vm[0, 2, :3] + vm[0, 2, 3]
        return z > NEAR_PLANE

    def forward(self, means3D, means2D, opacities, shs=None, colors_precomp=None, scales=None,
                rotations=None, cov3D_precomp=None):
        s = self.raster_settings
        if (shs is None) == (colors_precomp is None):
            raise ValueError("Please provide excatly one of either SHs or precomputed colors!")
        if cov3D_precomp is not None:
            raise NotImplementedError("cov3D_precomp is not supported by gsrender; pass scales "
                                      "and rotations")
        if scales is None or rotations is None:
            raise ValueError("Please provide scales and rotations (cov3D_precomp is not supported)")
        W, H = int(s.image_width), int(s.image_height)
        viewmats, Ks = camera_from_settings(s)
        if shs is not None:
            colors, sh_degree = shs, int(s.sh_degree)
        else:
            colors, sh_degree = colors_precomp, None
        out = _rasterize(means3D, rotations, scales * float(s.scale_modifier),
                         opacities.reshape(-1), colors, viewmats.to(means3D.dtype),
                         Ks.to(means3D.dtype), W, H, sh_degree=sh_degree,
                         backgrounds=s.bg.to(means3D.dtype), near_plane=NEAR_PLANE,
                         antialiased=bool(getattr(s, "antialiasing", False)))
        means2d = out.meta["means2d"]  # [1, N, 2] pixels
        if means2D is not None and means2D.requires_grad and means2d.requires_grad:
            means2d.register_hook(_means2d_grad_hook(means2D, W, H))
        color = out.colors[0].permute(2, 0, 1)  # [3, H, W]
        radii = out.meta["radii"][0].amax(dim=-1)  # [N] int32
        if getattr(s, "return_depth", False):
            return color, radii, out.depths[0].permute(2, 0, 1)  # [1, H, W]
        return color, radii
