"""Removal-3D metrics (docs/design.md §7): remove the selected set S, re-render expected depth and compare
with the depth of the scene without the true object Gaussians (D_exp).

All depth maps here are expected depths ED = Σwᵢzᵢ / Σwᵢ [C,H,W] with their alphas; a pixel whose
alpha falls under HOLE_ALPHA is a hole (the removal exposed nothing) and counts as error 1
(relative) or D_exp (absolute)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from gsrender.render import rasterize
from gsrender.scene import GaussianModel

HOLE_ALPHA = 0.5
COLLATERAL_DILATION = 3  # px: the object's fringe is not collateral damage
# a pixel whose expected depth moves by more than this fraction when the true set is removed is a
# "depth-change" pixel: on a trained model an object's low-weight Gaussians (fringes, floaters,
# layers behind other surfaces) change depth where the object does not dominate the pixel, so the
# object's mask alone misses them; 1 % sits well above float32 depth noise (~1e-6 relative)
DEPTH_CHANGE_REL = 0.01


def expected_depth(model: GaussianModel, viewmats, Ks, width: int, height: int):
    """-> (ED [C,H,W], alpha [C,H,W]) of a scene (0 depth where alpha is 0)."""
    C = viewmats.shape[0]
    if model.num_gaussians == 0:
        z = torch.zeros(C, height, width)
        return z, z.clone()
    with torch.no_grad():
        out = rasterize(model.means, model.quats, model.scales, model.opacities, model.sh,
                        viewmats, Ks, width, height, sh_degree=model.sh_degree)
    a = out.alphas[..., 0]
    return out.depths[..., 0] / a.clamp_min(1e-8), a


def _abs_err(d, a, d_exp):
    """|D − D_exp| with holes counted as D_exp."""
    return torch.where(a < HOLE_ALPHA, d_exp, (d - d_exp).abs())


def rde(d_removed, a_removed, d_exp, mask, cap: bool = True) -> float:
    """Mean over mask pixels of |D[G∖S] − D_exp| / D_exp, a hole counting 1; with cap, each
    pixel's error capped at 1 (min(1, ·)) as the hand-built studies report it."""
    rel = _abs_err(d_removed, a_removed, d_exp) / d_exp.clamp_min(1e-8)  # a hole: D_exp / D_exp
    rel = rel.clamp_max(1.0) if cap else rel
    return float(rel[mask].mean()) if mask.any() else 0.0


def nrde(d_removed, a_removed, d_full, a_full, d_exp, mask) -> float:
    """Σ|D[G∖S] − D_exp| / Σ|D[G] − D_exp| over mask pixels: 0 perfect, 1 nothing removed."""
    den = float(_abs_err(d_full, a_full, d_exp)[mask].sum())
    if den <= 0:
        return 0.0
    return float(_abs_err(d_removed, a_removed, d_exp)[mask].sum()) / den


def depth_change(d_full, a_full, d_exp, a_exp, rel: float = DEPTH_CHANGE_REL) -> torch.Tensor:
    """[C,H,W] bool: the pixels where removing the true set moves the expected depth by more than
    rel of the depth without it (a hole in the full scene counting as a change), on a surface of
    the scene without it."""
    return (_abs_err(d_full, a_full, d_exp) > rel * d_exp) & (a_exp >= HOLE_ALPHA)


def dilate(mask: torch.Tensor, px: int) -> torch.Tensor:
    """[C,H,W] bool dilated by a (2px+1)² square."""
    if px <= 0:
        return mask
    return F.max_pool2d(mask[:, None].float(), 2 * px + 1, stride=1, padding=px)[:, 0] > 0


def erode(mask: torch.Tensor, px: int) -> torch.Tensor:
    return ~dilate(~mask, px)


def collateral(d_removed, a_removed, d_exp, a_exp, mask, dilation: int = COLLATERAL_DILATION) -> float:
    """Mean relative depth error (min 1, holes 1) outside the dilated object mask, where the
    expected scene has a surface: > 0 when the selection ate into other objects or the floor."""
    out = ~dilate(mask, dilation) & (a_exp >= HOLE_ALPHA)
    rel = (_abs_err(d_removed, a_removed, d_exp) / d_exp.clamp_min(1e-8)).clamp_max(1.0)
    return float(rel[out].mean()) if out.any() else 0.0


def gaussian_iou(selected: torch.Tensor, truth: torch.Tensor, opacities: torch.Tensor) -> float:
    """Opacity-weighted IoU of two bool [N] sets."""
    inter = float((opacities * (selected & truth)).sum())
    union = float((opacities * (selected | truth)).sum())
    return inter / union if union > 0 else 1.0


def contributions(model: GaussianModel, viewmats, Ks, width: int, height: int) -> torch.Tensor:
    """Per-Gaussian Σ of the renderer's weights wᵢ over every pixel of every view [N]: the
    gradient of the summed rendered channel of a constant feature 1."""
    ones = torch.ones(model.num_gaussians, 1, requires_grad=True)
    out = rasterize(model.means.detach(), model.quats.detach(), model.scales.detach(),
                    model.opacities.detach(), model.sh.detach(), viewmats, Ks, width, height,
                    sh_degree=model.sh_degree, features=ones)
    (g,) = torch.autograd.grad(out.features.sum(), ones)
    return g[:, 0]


def recall_per_quartile(selected: torch.Tensor, truth: torch.Tensor,
                        contribution: torch.Tensor) -> list[float]:
    """Recall of the true set split into 4 quartiles of contribution (q1 = lowest)."""
    idx = torch.nonzero(truth, as_tuple=True)[0]
    if idx.numel() == 0:
        return [1.0] * 4
    order = idx[torch.argsort(contribution[idx], stable=True)]
    return [float(selected[q].float().mean()) if q.numel() else 1.0
            for q in torch.tensor_split(order, 4)]


HIDDEN_REL = 1e-3  # "near-zero" rendered weight: under this fraction of the median Gaussian's


def hidden_mask(w_sum: torch.Tensor) -> torch.Tensor:
    """bool [N]: the hidden Gaussians given their rendered weights summed over every pixel of the
    training views (weight_stats' w_sum): Σw < HIDDEN_REL · the median Gaussian's Σw. The one
    definition of "hidden" (what a loss on rendered pixels cannot reach)."""
    return w_sum < HIDDEN_REL * w_sum.median()


def hidden_share(model: GaussianModel, viewmats, Ks, width: int, height: int,
                 subset: torch.Tensor | None = None) -> float:
    """Share of the Gaussians (of `subset`, bool [N], all by default) that hidden_mask calls
    hidden over the views."""
    from gsrender.loc.stats import weight_stats

    hid = hidden_mask(weight_stats(model, viewmats, Ks, width, height).w_sum)
    if subset is not None:
        hid = hid[subset]
    if hid.numel() == 0:
        raise ValueError("hidden_share: no Gaussians in subset")
    return float(hid.float().mean())


def iou(pred: torch.Tensor, gt: torch.Tensor) -> float:
    union = float((pred | gt).sum())
    return float((pred & gt).sum()) / union if union > 0 else 1.0


def miou(pred: torch.Tensor, gt: torch.Tensor, classes=None) -> float:
    """Mean IoU over classes (those present in gt by default) of label maps [C,H,W]."""
    cls = torch.unique(gt).tolist() if classes is None else list(classes)
    return sum(iou(pred == k, gt == k) for k in cls) / max(len(cls), 1)


def boundary_iou(pred: torch.Tensor, gt: torch.Tensor, px: int = 2) -> float:
    """Boundary IoU (Cheng et al. 2021) of bool masks [C,H,W]: IoU of the inner bands of width px
    along each mask's contour."""
    band = lambda m: m & ~erode(m, px)
    return iou(band(pred), band(gt))


def removal_metrics(scene: GaussianModel, selected: torch.Tensor, truth: torch.Tensor, viewmats,
                    Ks, width: int, height: int, masks: torch.Tensor, full=None, expected=None,
                    contribution=None, seen: torch.Tensor | None = None) -> dict:
    """Every 3D metric for removing `selected` when `truth` is the object (bool [N] each).
    masks [C,H,W] bool: the object's clean mask per view. full / expected: (ED, alpha) of the
    whole scene / of the scene without `truth`; contribution: contributions(scene, ...) (each
    recomputed when None). seen [C,H,W] bool (gsrender.voda.seen.seen_surface): adds rde_seen
    and nrde_seen, the same errors on the mask's pixels whose exposed surface a training view
    saw. rde_change / nrde_change: the same errors on the depth-change pixels (depth_change), in
    or out of the mask."""
    d_full, a_full = full if full is not None else expected_depth(scene, viewmats, Ks, width, height)
    d_exp, a_exp = expected if expected is not None else expected_depth(
        scene.subset(~truth), viewmats, Ks, width, height)
    d_rem, a_rem = expected_depth(scene.subset(~selected), viewmats, Ks, width, height)
    mask = masks & (a_exp >= HOLE_ALPHA)
    contrib = contribution if contribution is not None else contributions(
        scene, viewmats, Ks, width, height)
    rec = recall_per_quartile(selected, truth, contrib)
    extra = {} if seen is None else {
        "rde_seen": rde(d_rem, a_rem, d_exp, mask & seen, cap=False),
        "nrde_seen": nrde(d_rem, a_rem, d_full, a_full, d_exp, mask & seen)}
    changed = depth_change(d_full, a_full, d_exp, a_exp)
    return {**extra, "rde": rde(d_rem, a_rem, d_exp, mask),
            "rde_change": rde(d_rem, a_rem, d_exp, changed, cap=False),
            "nrde_change": nrde(d_rem, a_rem, d_full, a_full, d_exp, changed),
            "rde_raw": rde(d_rem, a_rem, d_exp, mask, cap=False),
            "nrde": nrde(d_rem, a_rem, d_full, a_full, d_exp, mask),
            "collateral": collateral(d_rem, a_rem, d_exp, a_exp, masks),
            "gaussian_iou": gaussian_iou(selected, truth, scene.opacities),
            "recall_q1": rec[0], "recall_quartiles": rec}
