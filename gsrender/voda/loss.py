"""The VODA objective (docs/design.md §7 steps 2-5), plug-and-play on top of a baseline's rendered loss.

Per labelled pixel: cluster features F_c = Σwᵢfᵢ/Σwᵢ; the cluster that best explains the label,
c* = argmax_c W_c·s(F_c, label) (s from the baseline: class probability or cosine); a volumetric
loss giving sg(F_c*) to every Gaussian of c* as a direct target, so each member's gradient is
independent of its compositing weight wᵢ (the rendered loss scales it by wᵢ, which starves the
Gaussians behind a surface's front); and a pixel loss on F_c* with pixels near a label boundary
up-weighted (where the choice of cluster matters most).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from gsrender.voda.clusters import K_MAX, TAU_ABS, TAU_REL, Contributors, cluster_features


@dataclass
class VodaConfig:
    tau_rel: float = TAU_REL      # cluster split: z_k − z_{k−1} > tau_rel·z_{k−1} + tau_abs
    tau_abs: float = TAU_ABS
    K_max: int = K_MAX            # contributors listed per pixel
    lambda_vol: float = 1.0       # volumetric loss weight
    lambda_pix: float = 0.2       # pixel loss (on F_c*) weight
    warmup: int = 40              # iterations on the baseline loss alone (F_c* is noise before)
    boundary_weight: float = 2.0  # extra weight of pixels within boundary_radius of a label edge
    boundary_radius: int = 2
    n_pixels: int = 512           # labelled pixels sampled per view and iteration
    veto: bool = False            # skip members the baseline confidently gives another class
    enclose: bool = False         # skip members behind the last one confidently of the label
    objects_only: bool = False    # sample only object pixels (id > 0), not background ones

    def __post_init__(self):
        for name in ("tau_rel", "tau_abs", "lambda_vol", "lambda_pix", "boundary_weight"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not v >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {v!r}")
        for name in ("K_max", "n_pixels", "warmup", "boundary_radius"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name in (
                    "warmup", "boundary_radius") else 1):
                raise ValueError(f"{name} must be a non-negative int, got {v!r}")


def boundary_weights(labels: torch.Tensor, radius: int = 2, weight: float = 2.0) -> torch.Tensor:
    """[C,H,W] int labels -> [C,H,W] pixel weights: 1 + weight within `radius` px of a pixel with
    another label."""
    if labels.dim() != 3:
        raise ValueError(f"labels must have shape [C,H,W], got {tuple(labels.shape)}")
    lab = labels.float()[:, None]  # [C, 1, H, W]
    k = 2 * radius + 1
    hi = F.max_pool2d(lab, k, stride=1, padding=radius)
    lo = -F.max_pool2d(-lab, k, stride=1, padding=radius)
    return 1.0 + weight * (hi != lo)[:, 0].to(torch.float32)


def voda_loss(features: torch.Tensor, contrib: Contributors, labels: torch.Tensor,
              score_fn: Callable, pixel_loss_fn: Callable, pixel_weights: torch.Tensor | None = None,
              cfg: VodaConfig | None = None, keep_fn: Callable | None = None,
              confident_fn: Callable | None = None):
    """λ_vol·L_vol + λ_pix·L_pix for per-Gaussian features [N,D] and contributors of C×P pixels.

    labels [C,P] long (-1: unlabelled). score_fn(F [...,D], labels [...]) -> s [...] in [0,1]
    (how well a feature explains a label); pixel_loss_fn(F [M,D], labels [M]) -> [M].
    pixel_weights [C,P] (e.g. boundary_weights at the pixels). keep_fn(f [E,D], labels [E]) ->
    bool [E] optionally vetoes members (e.g. Gaussians the baseline already confidently gives to
    another class: a touching neighbour whose surface shares the depth cluster).
    confident_fn(f [E,D], labels [E]) -> bool [E] (the baseline already gives the Gaussian the
    label) enables cfg.enclose: along each ray, members behind the last confident one are left
    out, so the target reaches what the object encloses (front surface ... back surface) and not
    what lies past its back, such as the floor hidden under it. Returns
    (loss, info) with
    info = {"vol", "pix", "members", "pixels"}.
    """
    cfg = cfg or VodaConfig()
    Fc, wsum = cluster_features(contrib, features)  # [C,P,Kc,D], [C,P,Kc]
    lab = labels.long()
    ok = (lab >= 0) & (contrib.counts > 0)  # [C, P]
    with torch.no_grad():
        s = score_fn(Fc, lab.clamp_min(0)[..., None].expand(wsum.shape))  # [C, P, Kc]
        score = torch.where(wsum > 0, wsum * s, torch.full_like(wsum, -1.0))
        c_star = score.argmax(-1)  # [C, P]
    F_star = Fc.gather(2, c_star[..., None, None].expand(*c_star.shape, 1, Fc.shape[-1]))[:, :, 0]
    # every Gaussian of c* gets sg(F_c*) directly: the gradient of this term on fᵢ is
    # 2(fᵢ − F_c*)/n, whatever fᵢ's weight wᵢ in the pixel
    members = contrib.valid & (contrib.clusters.long() == c_star[..., None]) & ok[..., None]
    if cfg.enclose and confident_fn is not None:
        with torch.no_grad():
            conf = torch.zeros_like(members)
            conf[members] = confident_fn(
                features.index_select(0, contrib.ids[members].long()),
                lab[:, :, None].expand(members.shape)[members])
            k = torch.arange(members.shape[-1], device=members.device)
            last = torch.where(conf, k, torch.full_like(k, -1)).amax(-1)  # [C, P]
            members = members & (k <= last[..., None])
    target = F_star.detach()[:, :, None, :].expand(*members.shape, Fc.shape[-1])[members]  # [E,D]
    f = features.index_select(0, contrib.ids[members].long())  # [E, D]
    if keep_fn is not None:
        with torch.no_grad():
            keep = keep_fn(f, lab[:, :, None].expand(members.shape)[members])
        f, target = f[keep], target[keep]
    n_mem = f.shape[0]
    vol = ((f - target) ** 2).sum() / max(n_mem, 1)
    pw = ok.to(features.dtype) if pixel_weights is None else pixel_weights.to(features.dtype) * ok
    per_pix = pixel_loss_fn(F_star[ok], lab[ok])  # [M]
    pix = (per_pix * pw[ok]).sum() / pw[ok].sum().clamp_min(1e-12)
    loss = cfg.lambda_vol * vol + cfg.lambda_pix * pix
    return loss, {"vol": float(vol.detach()), "pix": float(pix.detach()), "members": int(n_mem),
                  "pixels": int(ok.sum())}
