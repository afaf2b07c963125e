"""Moment-preserving Mixture-of-Gaussians split (docs/design.md §7 SplitGS-Loc (1)).

A Gaussian N(μ, Σ), Σ = R S² Rᵀ, is split along a principal axis u (a column of R) with scale s
into K children: mean μ + m_k·s·u, scale σ̃_k·s along u (other axes unchanged), mixture weight w_k.
The library (w, m, σ̃) comes from partitioning the standard normal at the Lloyd–Max thresholds:
piece k is N(0,1) restricted to [t_k, t_{k+1}), so w_k is its probability, m_k its mean and σ̃_k²
its variance. The pieces add up to N(0,1) exactly, hence (law of total variance)

    Σ w_k = 1,   Σ w_k m_k = 0,   Σ w_k (σ̃_k² + m_k²) = 1,

and the mixture has the parent's mean and covariance. Splitting several axes one after another
gives the product mixture; its cross terms vanish because Σ w_k m_k = 0 on every axis.

Child opacity rules (`opacity_rule`):
- "density": a Gaussian of opacity o is the density o·g(x) with g unnormalised, i.e.
  o·(2π)^{3/2}|Σ|^{1/2}·N(x; μ, Σ). Giving child k the share w_k of that density means
  o_k = o·w_k/σ̃_k (|Σ_k|^{1/2} = σ̃_k·|Σ|^{1/2}): the children carry the parent's density mass,
  but not its image. Their summed footprint is flatter than the parent's (K=2: 0.69× at the
  centre) and α-compositing the overlapping children loses more, so an opacity-0.99 Gaussian
  split on two axes composites to α 0.40 at its centre.
- "peak" (the earlier default): o_k = o·c(o)·w_k/σ̃_k with one gain c(o) per library and parent opacity,
  chosen so the children's α-composite along the split axis, 1 − Π_k (1 − o_k·g_k), peaks at
  the parent's peak α o (K=2: c ≈ 1.2). The composited image then keeps the parent's strongest
  α, so the children dominate their pixels as the parent did; it keeps the density rule's
  relative weights, so a split along one axis still preserves the mixture's mean and covariance
  (up to the opacity cap). No opacity rule reproduces the whole image: the children sit ±0.8σ
  apart at width 0.6σ (K=2), so the composite dips between them whatever their opacities; the
  density rule is nearly the least-squares fit of the composite (K=2: the best common gain is
  0.99–1.00); the peak rule trades a larger coverage (K=2, two axes: +32 % α mass) for the
  preserved peak.
- "image": o_k = o·c(o)·w_k/σ̃_k with c(o) the least-squares fit of the children's α-composite to
  the parent's α over its footprint (±3σ on the split axis and across it): the rule that keeps
  the composited image as close to the parent's as an opacity gain can. Across the split axis
  the parent's α is o·h(y), so the fit pools the 1-D fits at the opacities o·h(y).
Opacities are capped at `max_opacity` (0.99, the renderer's α cap). DEFAULT_OPACITY_RULE was
chosen between "density" and "image" on the localization study's tuning scenes
(studies/loc/REPORT.md).

Which axes are split: every principal axis whose median screen footprint exceeds rho_max, except
(by default) the thinnest one. A trained surface Gaussian is flat along the surface normal; split
there, its children sit in front of and behind the surface, and a keypoint lifted onto one of
them lands off the surface along its ray. `split_normal=True` restores splitting that axis too.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import replace
from functools import cache

import torch

from gsrender.contract import ALPHA_MAX
from gsrender.geometry import quat_to_rotmat
from gsrender.loc.stats import view_sizes
from gsrender.scene import GaussianModel

LIBRARY_SIZES = (2, 3, 4)
# The median screen footprint (px) above which an axis is split; docs/design.md §7's "~2 px".
DEFAULT_RHO_MAX = 2.0
DEFAULT_LEVELS = 2
MAX_OPACITY = ALPHA_MAX  # the renderer's α cap (0.99)
OPACITY_RULES = ("peak", "density", "image")
DEFAULT_OPACITY_RULE = "image"


def _pdf(x: float) -> float:
    return 0.0 if math.isinf(x) else math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _xpdf(x: float) -> float:
    return 0.0 if math.isinf(x) else x * _pdf(x)


def _pieces(thresholds: list[float]) -> tuple[list[float], list[float], list[float]]:
    """Weights, means and variances of N(0,1) restricted to the intervals cut at thresholds."""
    edges = [-math.inf, *thresholds, math.inf]
    w, m, v = [], [], []
    for a, b in itertools.pairwise(edges):
        p = _cdf(b) - _cdf(a)
        mean = (_pdf(a) - _pdf(b)) / p
        # E[x²] over the piece: 1 + (aφ(a) − bφ(b))/p
        w.append(p), m.append(mean), v.append(1.0 + (_xpdf(a) - _xpdf(b)) / p - mean * mean)
    return w, m, v


@cache
def lloyd_max_thresholds(k: int) -> tuple[float, ...]:
    """The K−1 decision thresholds of the K-level Lloyd–Max quantiser of N(0,1) (Lloyd's
    iteration in float64: thresholds = midpoints of the levels, levels = the pieces' means)."""
    thr = [(-1.0 + 2.0 * (i + 1) / k) * 1.5 for i in range(k - 1)]
    for _ in range(500):
        _, means, _ = _pieces(thr)
        new = [0.5 * (means[i] + means[i + 1]) for i in range(k - 1)]
        if max((abs(a - b) for a, b in zip(new, thr)), default=0.0) < 1e-15:
            break
        thr = new
    return tuple(thr)


def mog_library(k: int, dtype=torch.float64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(w [K], m [K], σ̃ [K]) of the K-piece moment-preserving split (K in 2, 3, 4).
    K=2 gives m = ±√(2/π), σ̃ = √(1−2/π)."""
    if isinstance(k, bool) or k not in LIBRARY_SIZES:
        raise ValueError(f"k must be one of {LIBRARY_SIZES}, got {k!r}")
    w, m, v = _pieces(list(lloyd_max_thresholds(k)))
    t = lambda x: torch.tensor(x, dtype=torch.float64).to(dtype)
    return t(w), t(m), t([math.sqrt(x) for x in v])


# Opacity levels of the peak rule's gain table, and the split-axis grid (in units of the parent's
# σ) on which the children's α-composite is evaluated.
_GAIN_LEVELS = 199
_AXIS_GRID = torch.linspace(-3.0, 3.0, 601, dtype=torch.float64)


def composite_profile(child_opacities: torch.Tensor, k: int) -> torch.Tensor:
    """α-composite 1 − Π_k (1 − o_k·g_k(x)) [L,X] of k children of opacities [L,k] along the
    split axis (x on _AXIS_GRID, in units of the parent's σ)."""
    _, m, sig = mog_library(k)
    g = torch.exp(-0.5 * ((_AXIS_GRID[None, :] - m[:, None]) / sig[:, None]) ** 2)  # [K,X]
    return 1.0 - torch.prod(1.0 - child_opacities[:, :, None] * g[None], dim=1)


@cache
def peak_gain_table(k: int, max_opacity: float = MAX_OPACITY) -> torch.Tensor:
    """The peak rule's gains c [_GAIN_LEVELS] at parent opacities linspace(0, 1): bisection on
    c in [0.5, 8] for max_x composite_profile = min(o, max_opacity) (the composite grows with c)."""
    o = torch.linspace(0.0, 1.0, _GAIN_LEVELS, dtype=torch.float64).clamp(1e-4, max_opacity)
    w, _, sig = mog_library(k)
    lo, hi = torch.full_like(o, 0.5), torch.full_like(o, 8.0)
    for _ in range(60):
        c = 0.5 * (lo + hi)
        o_k = (o[:, None] * c[:, None] * (w / sig)[None]).clamp_max(max_opacity)  # [L,K]
        low = composite_profile(o_k, k).amax(1) < o
        lo, hi = torch.where(low, c, lo), torch.where(low, hi, c)
    return 0.5 * (lo + hi)


# Points across the split axis (units of σ) at which the image rule fits the composite.
_ACROSS_GRID = torch.linspace(-3.0, 3.0, 31, dtype=torch.float64)


@cache
def image_gain_table(k: int, max_opacity: float = MAX_OPACITY) -> torch.Tensor:
    """The image rule's gains c [_GAIN_LEVELS] at parent opacities linspace(0, 1): golden-section
    search for the least-squares fit of the children's α-composite to the parent's α
    o·g(x)·h(y) over x, y in ±3σ. The search runs over c in [0.5, 3] below the gain at which the
    least opaque child reaches max_opacity: beyond it the error stops changing, and that plateau
    would trap the search; below it the error falls and then rises."""
    o = torch.linspace(0.0, 1.0, _GAIN_LEVELS, dtype=torch.float64).clamp(1e-4, max_opacity)
    w, _, sig = mog_library(k)
    h = torch.exp(-0.5 * _ACROSS_GRID ** 2)  # [Y] the parent's profile across the split axis
    g = torch.exp(-0.5 * _AXIS_GRID ** 2)  # [X] and along it
    target = (o[:, None, None] * h[None, :, None]) * g[None, None, :]  # [L,Y,X]

    def err(c):  # [L]
        o_k = (o[:, None] * c[:, None] * (w / sig)[None]).clamp_max(max_opacity)  # [L,K]
        prof = composite_profile((o_k[:, None, :] * h[None, :, None]).reshape(-1, k), k)
        return ((prof.reshape(target.shape) - target) ** 2).sum((1, 2))

    inv_phi = (math.sqrt(5.0) - 1.0) / 2.0
    lo = torch.full_like(o, 0.5)
    hi = (max_opacity / (o * (w / sig).min())).clamp(0.5, 3.0)
    for _ in range(60):
        a, b = hi - inv_phi * (hi - lo), lo + inv_phi * (hi - lo)
        left = err(a) < err(b)
        lo, hi = torch.where(left, lo, a), torch.where(left, b, hi)
    return 0.5 * (lo + hi)


def _interpolate(table: torch.Tensor, opacities: torch.Tensor) -> torch.Tensor:
    """A gain table over linspace(0, 1) read at opacities [S] (linear interpolation)."""
    table = table.to(opacities.dtype)
    pos = opacities.clamp(0, 1) * (_GAIN_LEVELS - 1)
    i0 = pos.floor().long().clamp_max(_GAIN_LEVELS - 2)
    f = pos - i0
    return table[i0] * (1 - f) + table[i0 + 1] * f


def peak_gain(opacities: torch.Tensor, k: int, max_opacity: float = MAX_OPACITY) -> torch.Tensor:
    """The peak rule's gain c(o) for parent opacities [S]."""
    return _interpolate(peak_gain_table(k, float(max_opacity)), opacities)


def child_gain(rule: str, opacities: torch.Tensor, k: int,
               max_opacity: float = MAX_OPACITY) -> torch.Tensor | float:
    """The gain c(o) that opacity rule `rule` applies on top of the density rule's o·w_k/σ̃_k."""
    if rule == "density":
        return 1.0
    if rule == "peak":
        return peak_gain(opacities, k, max_opacity)
    return _interpolate(image_gain_table(k, float(max_opacity)), opacities)


def split_axis(model: GaussianModel, mask: torch.Tensor, axis: int, k: int = 2,
               max_opacity: float = MAX_OPACITY,
               opacity_rule: str = DEFAULT_OPACITY_RULE) -> tuple[GaussianModel, torch.Tensor]:
    """Splits the Gaussians where mask [N] is true along their principal axis `axis` (0..2) into k
    children each; the others are kept as they are. Children follow their parent; their
    opacities follow opacity_rule (module docstring).
    Returns (model [N'], parent [N'] int64 index into the input)."""
    if axis not in (0, 1, 2):
        raise ValueError(f"axis must be 0, 1 or 2, got {axis!r}")
    if opacity_rule not in OPACITY_RULES:
        raise ValueError(f"opacity_rule must be one of {OPACITY_RULES}, got {opacity_rule!r}")
    N = model.num_gaussians
    if mask.shape != (N,) or mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor of shape [{N}], got {mask.dtype} "
                         f"{list(mask.shape)}")
    w, m, sig = (t.to(model.means.dtype) for t in mog_library(k))
    idx = mask.nonzero().squeeze(1)  # [S]
    S = idx.numel()
    keep = (~mask).nonzero().squeeze(1)
    parent = torch.cat([keep, idx.repeat_interleave(k)])  # [N - S + S·k]
    out = model.subset(parent)
    if S == 0:
        return out, parent
    nk = N - S
    child = torch.arange(S * k) % k  # [S·k] which piece
    s = model.scales[idx, axis].repeat_interleave(k)  # [S·k]
    u = quat_to_rotmat(model.quats[idx])[:, :, axis].repeat_interleave(k, dim=0)  # [S·k, 3]
    means, scales, opac = out.means.clone(), out.scales.clone(), out.opacities.clone()
    means[nk:] += (m[child] * s)[:, None] * u
    scales[nk:, axis] = sig[child] * s
    gain = child_gain(opacity_rule, opac[nk:], k, max_opacity)
    opac[nk:] = (opac[nk:] * gain * w[child] / sig[child]).clamp_max(max_opacity)
    return replace(out, means=means, scales=scales, opacities=opac), parent


def mixture_moments(means: torch.Tensor, covs: torch.Tensor, weights: torch.Tensor):
    """Mean [3] and covariance [3,3] of the mixture Σ weights·N(means, covs) (weights sum to 1)."""
    mu = (weights[:, None] * means).sum(0)
    d = means - mu
    cov = (weights[:, None, None] * (covs + d[:, :, None] * d[:, None, :])).sum(0)
    return mu, cov


def axis_footprints(means, quats, scales, viewmats, Ks, width, height,
                    near_plane: float = 0.01) -> torch.Tensor:
    """Median over views of each principal axis' screen footprint in pixels: the length of the
    projected 1σ axis vector J·R_view·(s·u), with J the pinhole Jacobian at the mean. Views where
    the mean is behind the camera or outside the image do not vote; a Gaussian seen by no view
    gets 0 (never split). width/height: ints or one per view. means [N,3], quats [N,4],
    scales [N,3] -> [N,3]."""
    axes = quat_to_rotmat(quats) * scales[:, None, :]  # [N,3,3]: column i = s_i·u_i
    fps = []
    sizes = view_sizes(width, height, viewmats.shape[0])
    for vm, K, (width, height) in zip(viewmats.to(means.dtype), Ks.to(means.dtype), sizes):
        R, t = vm[:3, :3], vm[:3, 3]
        pc = means @ R.T + t  # [N,3]
        z = pc[:, 2]
        zs = z.clamp_min(near_plane)
        fx, fy = K[0, 0], K[1, 1]
        u, v = fx * pc[:, 0] / zs + K[0, 2], fy * pc[:, 1] / zs + K[1, 2]
        seen = (z > near_plane) & (u >= 0) & (u < width) & (v >= 0) & (v < height)  # [N]
        ac = R @ axes  # [N,3,3] axes in camera space
        zz = zs[:, None]
        du = fx * (ac[:, 0] / zz - pc[:, 0, None] * ac[:, 2] / zz ** 2)  # [N,3]
        dv = fy * (ac[:, 1] / zz - pc[:, 1, None] * ac[:, 2] / zz ** 2)
        fp = torch.sqrt(du * du + dv * dv)
        fps.append(torch.where(seen[:, None], fp, torch.full_like(fp, float("nan"))))
    med = torch.nanmedian(torch.stack(fps), dim=0).values  # [N,3]
    return torch.nan_to_num(med, nan=0.0)


def split_gaussians(model: GaussianModel, viewmats, Ks, width, height, *,
                    rho_max: float = DEFAULT_RHO_MAX, levels: int = DEFAULT_LEVELS, k: int = 2,
                    max_gaussians: int | None = None, max_opacity: float = MAX_OPACITY,
                    opacity_rule: str = DEFAULT_OPACITY_RULE,
                    split_normal: bool = False) -> tuple[GaussianModel, torch.Tensor]:
    """Footprint-driven recursive split: at each of up to `levels` levels, every axis whose
    median screen footprint over the views exceeds rho_max px is split into k children (axes
    one after another, so a Gaussian large on two axes becomes the k×k product). The input
    Gaussian's thinnest axis (its normal) is never split unless split_normal; children keep
    their parent's normal axis, though splitting may make another axis thinner. With
    max_gaussians, a level splits the Gaussians with the largest footprints first and only as
    many as keep the total within the budget. Stops when nothing is left to split. Children's
    opacities follow opacity_rule (module docstring).
    Returns (split model, parent [N'] index into the input model)."""
    if not rho_max > 0:
        raise ValueError(f"rho_max must be > 0, got {rho_max}")
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 0:
        raise ValueError(f"levels must be an int >= 0, got {levels!r}")
    parent = torch.arange(model.num_gaussians)
    normal = model.scales.argmin(1)  # [N] each input Gaussian's thinnest axis
    for _ in range(levels):
        fp = axis_footprints(model.means, model.quats, model.scales, viewmats, Ks, width, height)
        big = fp > rho_max  # [N,3]
        if not split_normal:
            big[torch.arange(big.shape[0]), normal[parent]] = False
        if not big.any():
            break
        if max_gaussians is not None:
            big = _within_budget(big, fp, k, max_gaussians)
            if not big.any():
                break
        for axis in range(3):
            model, p = split_axis(model, big[:, axis], axis, k, max_opacity, opacity_rule)
            big, parent = big[p], parent[p]
    return model, parent


def _within_budget(big: torch.Tensor, fp: torch.Tensor, k: int, max_gaussians: int) -> torch.Tensor:
    """Restricts the split mask big [N,3] so the split model has at most max_gaussians
    Gaussians, keeping the Gaussians with the largest footprints."""
    extra = k ** big.sum(1) - 1  # [N] Gaussians added by splitting each
    room = max_gaussians - big.shape[0]
    if int(extra.sum()) <= room:
        return big
    order = torch.argsort(torch.where(big, fp, 0).amax(1), descending=True)
    fits = torch.cumsum(extra[order], 0) <= room
    allowed = torch.zeros_like(fits)
    allowed[order] = fits
    return big & allowed[:, None]
