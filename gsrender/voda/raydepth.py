"""Ray-depth clustering of a pixel's contributors: each Gaussian's depth and 1-D extent along the
pixel's ray, and clusters of bounded span.

Along the ray X(z) = o + z·d (z the view depth, d the pixel's direction with unit view-z), a
Gaussian's density is ∝ exp(−½(z − z*)²/σ_z²) with σ_z⁻² = dᵀAd and z* = dᵀA(μ − o)/dᵀAd
(A = Σ⁻¹): z* is where the ray passes closest (in Mahalanobis terms) to the Gaussian, which can
lie far from the view depth of its mean when the Gaussian is a flat disc seen obliquely, and σ_z
is how far along the ray it extends. Chaining consecutive mean depths (the op's clusters) lets a
cluster grow without bound as long as no single gap is large (a sloping floor chains onto the
object standing on it); here a cluster is the run of entries, in order of z*, whose extents
[z* − extent·σ_z, z* + extent·σ_z] overlap the cluster's and whose z* lies within span_rel·z of
the cluster's first z*."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gsrender.reference import quat_to_rotmat
from gsrender.scene import GaussianModel

SPAN_REL = 0.03  # the op's τ_rel, now bounding a cluster's span instead of each gap
EXTENT = 1.0     # σ_z either side of z*: the part of a Gaussian a ray sees as it


@dataclass
class RayGeometry:
    """What ray depths need of a scene: means [N,3] and precisions Σ⁻¹ [N,3,3] (world)."""

    means: torch.Tensor
    precisions: torch.Tensor

    @classmethod
    def of(cls, model: GaussianModel) -> RayGeometry:
        with torch.no_grad():
            m = quat_to_rotmat(model.quats) / model.scales[:, None, :]  # R·S⁻¹
            return cls(model.means.detach().clone(), m @ m.transpose(-1, -2))


def pixel_rays(viewmat: torch.Tensor, K: torch.Tensor, pixels: torch.Tensor):
    """World origin [3] and directions [P,3] (unit view-z) through the centres of pixels [P,2]
    (x, y) of a camera (viewmat world-to-camera [4,4], intrinsics K [3,3])."""
    R, t = viewmat[:3, :3], viewmat[:3, 3]
    uv = pixels.to(R.dtype) + 0.5
    d_cam = torch.stack([(uv[:, 0] - K[0, 2]) / K[0, 0], (uv[:, 1] - K[1, 2]) / K[1, 1],
                         torch.ones_like(uv[:, 0])], -1)
    return -R.T @ t, d_cam @ R  # (Rᵀ d_cam)ᵀ = d_camᵀ R


def ray_depths(geom: RayGeometry, viewmat: torch.Tensor, K: torch.Tensor, pixels: torch.Tensor,
               ids: torch.Tensor):
    """(z* [P,K], σ_z [P,K]) of the Gaussians ids [P,K] (−1: none, giving 0, 0) along the rays
    of pixels [P,2]."""
    o, d = pixel_rays(viewmat, K, pixels)  # [3], [P,3]
    valid = ids >= 0
    gid = ids[valid].long()
    dv = d[:, None, :].expand(*ids.shape, 3)[valid]  # [E,3]
    Ad = (geom.precisions[gid] @ dv[:, :, None])[:, :, 0]  # [E,3]
    a2 = (dv * Ad).sum(-1).clamp_min(1e-20)
    a1 = ((geom.means[gid] - o) * Ad).sum(-1)
    z_peak, z_sigma = torch.zeros(ids.shape, dtype=d.dtype), torch.zeros(ids.shape, dtype=d.dtype)
    z_peak[valid], z_sigma[valid] = a1 / a2, a2.rsqrt()
    return z_peak, z_sigma


def ray_clusters(z_peak: torch.Tensor, z_sigma: torch.Tensor, valid: torch.Tensor,
                 span_rel: float = SPAN_REL, extent: float = EXTENT) -> torch.Tensor:
    """int32 [...,K] cluster index of each entry (−1 where not valid): entries in order of z*, a
    new cluster when an entry's extent starts past the open cluster's far end or its z* lies
    more than span_rel·z_first past the cluster's first z*. Clusters are numbered front to back
    from 0 in each pixel."""
    shape = z_peak.shape
    K = shape[-1]
    zp = torch.where(valid, z_peak, torch.full_like(z_peak, float("inf"))).reshape(-1, K)
    order = zp.argsort(dim=-1, stable=True)
    zs, sg = zp.gather(1, order), z_sigma.reshape(-1, K).gather(1, order)
    ok = valid.reshape(-1, K).gather(1, order)
    out = torch.full_like(order, -1)
    cluster = torch.full((zs.shape[0],), -1, dtype=order.dtype)
    first = torch.zeros_like(zs[:, 0])
    far = torch.full_like(zs[:, 0], -float("inf"))
    for k in range(K):
        z, lo, hi = zs[:, k], zs[:, k] - extent * sg[:, k], zs[:, k] + extent * sg[:, k]
        opens = ok[:, k] & ((cluster < 0) | (lo > far) | (z - first > span_rel * first.abs()))
        cluster = cluster + opens.to(cluster.dtype)
        first = torch.where(opens, z, first)
        far = torch.where(opens, hi, torch.where(ok[:, k], torch.maximum(far, hi), far))
        out[:, k] = torch.where(ok[:, k], cluster, torch.full_like(cluster, -1))
    return torch.full_like(out, -1).scatter_(1, order, out).reshape(shape).to(torch.int32)
