"""The VODA objective (docs/design.md §7 steps 2-5), plug-and-play on top of a baseline's rendered loss.

Per labelled pixel: cluster features F_c = Σwᵢfᵢ/Σwᵢ; the cluster that best explains the label,
c* = argmax_c W_c·s(F_c, label) (s from the baseline: class probability or cosine); a volumetric
loss giving sg(F_c*) to every Gaussian of c* as a direct target, so each member's gradient is
independent of its compositing weight wᵢ (the rendered loss scales it by wᵢ, which starves the
Gaussians behind a surface's front); and a pixel loss on F_c* with pixels near a label boundary
up-weighted (where the choice of cluster matters most).

Each choice below that the method's description leaves open is a switch, measured one factor at a
time in studies/voda/REPORT.md; the defaults were frozen on that study's tuning scenes
(``clustering="ray"``), and the behaviour before the freeze stays reachable (``clustering="gap"``):
membership (the contributor walk past the renderer's stop, or the renderer's contributors
only), a footprint floor on the members' α, the clustering (chained mean-depth gaps, or ray
depths with a bounded span: gsrender.voda.raydepth), the volumetric weight (as is, or scaled like
the baseline's own loss) and the boundary band (every label edge, or edges between two objects).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from gsrender.voda.clusters import K_MAX, TAU_ABS, TAU_REL, Contributors, cluster_features
from gsrender.voda.raydepth import EXTENT, SPAN_REL

# A member's α at the pixel under this is a footprint tail grazing the pixel, not the Gaussian
# seen there: about 2σ from an opaque Gaussian's centre (exp(−2) ≈ 0.135), set before any run
ALPHA_FLOOR = 0.1


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
    # "walk": the op's list, which goes past the renderer's stop while the open cluster chains;
    # "rendered": the renderer's contributors only (before T < 1e-4)
    membership: Literal["walk", "rendered"] = "walk"
    alpha_floor: float = 0.0      # members need α ≥ this at the pixel (0: the renderer's 1/255)
    # "gap": the op's chained mean-depth gaps (tau_rel, tau_abs); "ray": depth and extent along
    # the pixel ray, span bounded by span_rel·z (gsrender.voda.raydepth). Frozen on the headroom
    # tuning scenes (studies/voda/REPORT.md, "The freeze")
    clustering: Literal["gap", "ray"] = "ray"
    span_rel: float = SPAN_REL
    extent: float = EXTENT
    scale_vol: bool = False       # λ_vol times the baseline's loss scale (gg: 1 / ln 256)
    boundary: Literal["labels", "objects"] = "labels"  # which label edges get boundary_weight

    def __post_init__(self):
        choices = {"membership": ("walk", "rendered"), "clustering": ("gap", "ray"),
                   "boundary": ("labels", "objects")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if not 0 <= self.alpha_floor < 1:
            raise ValueError(f"alpha_floor must be in [0, 1), got {self.alpha_floor!r}")
        for name in ("tau_rel", "tau_abs", "lambda_vol", "lambda_pix", "boundary_weight",
                     "span_rel", "extent"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not v >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {v!r}")
        for name in ("K_max", "n_pixels", "warmup", "boundary_radius"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name in (
                    "warmup", "boundary_radius") else 1):
                raise ValueError(f"{name} must be a non-negative int, got {v!r}")


def boundary_weights(labels: torch.Tensor, radius: int = 2, weight: float = 2.0,
                     between: str = "labels") -> torch.Tensor:
    """[C,H,W] int labels -> [C,H,W] pixel weights: 1 + weight within `radius` px of a pixel with
    another label. between="objects": only object pixels (id > 0) within `radius` px of another
    object's pixel: the edges where two objects meet, not an object's edge against the
    background or unlabelled pixels, where a noisy mask's erosion or dilation makes the labels
    themselves wrong."""
    if labels.dim() != 3:
        raise ValueError(f"labels must have shape [C,H,W], got {tuple(labels.shape)}")
    if between not in ("labels", "objects"):
        raise ValueError(f"between must be 'labels' or 'objects', got {between!r}")
    lab = labels.float()[:, None]  # [C, 1, H, W]
    k = 2 * radius + 1
    pool = lambda x: F.max_pool2d(x, k, stride=1, padding=radius)
    if between == "labels":
        edge = pool(lab) != -pool(-lab)
    else:
        obj = lab > 0
        hi = pool(torch.where(obj, lab, torch.full_like(lab, -1.0)))
        lo = -pool(-torch.where(obj, lab, torch.full_like(lab, float(2 ** 24))))
        edge = obj & ((hi > lab) | (lo < lab))
    return 1.0 + weight * edge[:, 0].to(torch.float32)


def voda_loss(features: torch.Tensor, contrib: Contributors, labels: torch.Tensor,
              score_fn: Callable, pixel_loss_fn: Callable, pixel_weights: torch.Tensor | None = None,
              cfg: VodaConfig | None = None, keep_fn: Callable | None = None,
              confident_fn: Callable | None = None, vol_scale: float = 1.0):
    """λ_vol·L_vol + λ_pix·L_pix for per-Gaussian features [N,D] and contributors of C×P pixels.

    labels [C,P] long (-1: unlabelled). score_fn(F [...,D], labels [...]) -> s [...] in [0,1]
    (how well a feature explains a label); pixel_loss_fn(F [M,D], labels [M]) -> [M].
    pixel_weights [C,P] (e.g. boundary_weights at the pixels). keep_fn(f [E,D], labels [E]) ->
    bool [E] optionally vetoes members (e.g. Gaussians the baseline already confidently gives to
    another class: a touching neighbour whose surface shares the depth cluster).
    confident_fn(f [E,D], labels [E]) -> bool [E] (the baseline already gives the Gaussian the
    label) enables cfg.enclose: along each ray, members behind the last confident one are left
    out, so the target reaches what the object encloses (front surface ... back surface) and not
    what lies past its back, such as the floor hidden under it. cfg.alpha_floor needs
    contrib.alphas (depth_contributors fills them). vol_scale multiplies λ_vol (cfg.scale_vol:
    the baseline's loss scale). Returns (loss, info) with info = {"vol", "pix", "members",
    "pixels", "member_ids" [E] (the Gaussians given the target, repeats included),
    "member_past_stop" [E] bool (listed after the renderer's stop)}.
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
    if cfg.alpha_floor > 0:
        if contrib.alphas is None:
            raise ValueError("alpha_floor needs contrib.alphas (from depth_contributors)")
        members = members & (contrib.alphas >= cfg.alpha_floor)
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
    ids = contrib.ids[members].long()
    past = contrib.past_stop[members]
    f = features.index_select(0, ids)  # [E, D]
    if keep_fn is not None:
        with torch.no_grad():
            keep = keep_fn(f, lab[:, :, None].expand(members.shape)[members])
        f, target, ids, past = f[keep], target[keep], ids[keep], past[keep]
    n_mem = f.shape[0]
    vol = ((f - target) ** 2).sum() / max(n_mem, 1)
    pw = ok.to(features.dtype) if pixel_weights is None else pixel_weights.to(features.dtype) * ok
    per_pix = pixel_loss_fn(F_star[ok], lab[ok])  # [M]
    pix = (per_pix * pw[ok]).sum() / pw[ok].sum().clamp_min(1e-12)
    loss = cfg.lambda_vol * vol_scale * vol + cfg.lambda_pix * pix
    return loss, {"vol": float(vol.detach()), "pix": float(pix.detach()), "members": int(n_mem),
                  "pixels": int(ok.sum()), "member_ids": ids, "member_past_stop": past}
