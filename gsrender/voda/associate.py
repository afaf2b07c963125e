"""Cross-view id association of per-view instance masks (SAM-style: every view numbers its
masks independently) through the Gaussians, so a user does not need pre-associated ids.

Each mask a (view c, local id i) is described by the Gaussians it sees: w_a[g] = Σ over the
mask's pixels of Gaussian g's renderer weight in view c (one backward pass of the rendered
masks; visibility-aware, a Gaussian hidden in view c gets nothing). Its affinity to a mask b of
another view d is the w_a-weighted share of those Gaussians whose centre projects into b, among
those projecting onto any labelled pixel of view d (background included). The projection is
not visibility-aware on purpose: an object's Gaussians seen from one side still land inside its
silhouette seen from the other. Pairs are merged greedily by the symmetric affinity
(A[a,b] + A[b,a]) / 2, highest first, down to MIN_AFFINITY, never putting two masks of one view
into the same object (union-find). Every group is one object, numbered 1.. in the order of its
first mask (view, then local id); background (0) is 0 in every view; ignored pixels (-1)
neither describe a mask nor count as labelled."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from gsrender.render import rasterize
from gsrender.scene import GaussianModel
from gsrender.voda.baselines import centre_labels

MIN_AFFINITY = 0.5  # below it two masks are not the same object (a majority of shared Gaussians)


def mask_weights(model: GaussianModel, vm, K, width: int, height: int,
                 onehot: torch.Tensor) -> torch.Tensor:
    """[N, M]: Σ over the pixels of each mask m (onehot [H,W,M] float) of each Gaussian's
    renderer weight in view (vm, K): the gradient of Σ_p onehot·render(ones)."""
    ones = torch.ones(model.num_gaussians, onehot.shape[-1], requires_grad=True)
    out = rasterize(model.means.detach(), model.quats.detach(), model.scales.detach(),
                    model.opacities.detach(), model.sh.detach(), vm[None], K[None], width,
                    height, sh_degree=model.sh_degree, features=ones).features[0]
    (g,) = torch.autograd.grad((out * onehot).sum(), ones)
    return g


def _find(parent: list[int], a: int) -> int:
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


def associate_masks(model: GaussianModel, viewmats: torch.Tensor, Ks: torch.Tensor, width: int,
                    height: int, masks: torch.Tensor, min_affinity: float = MIN_AFFINITY):
    """masks [C,H,W] long per-view instance ids (0 background, -1 ignored, any other values in
    any order per view) -> (labels [C,H,W] with one global id per object across the views
    (0 background, -1 ignored, objects 1..n), {view: {local id: global id}})."""
    C = viewmats.shape[0]
    if masks.shape != (C, height, width):
        raise ValueError(f"masks must have shape [C,H,W]=({C}, {height}, {width}), got "
                         f"{tuple(masks.shape)}")
    if not 0 < min_affinity <= 1:
        raise ValueError(f"min_affinity must be in (0, 1], got {min_affinity}")
    keys, w = [], []  # one entry per mask: (view, local id), its Gaussian weights [N]
    centre = []       # per view: the local label under each Gaussian's centre [N]
    for c in range(C):
        m = masks[c]
        ids = sorted(int(i) for i in torch.unique(m) if i > 0)
        if ids:
            onehot = torch.stack([(m == i).float() for i in ids], -1)
            g = mask_weights(model, viewmats[c], Ks[c], width, height, onehot)
            keys += [(c, i) for i in ids]
            w.append(g.T)
        centre.append(centre_labels(model.means, m, viewmats[c], Ks[c]))
    maps: dict[int, dict[int, int]] = {c: {} for c in range(C)}
    if not keys:
        return masks.clone(), maps
    W = torch.cat(w)  # [M, N]
    M = len(keys)
    A = torch.zeros(M, M)
    for d in range(C):
        lab = centre[d]
        onehot = F.one_hot(lab.clamp_min(0), int(lab.max().clamp_min(0)) + 1).float()
        hits = W @ (onehot * (lab >= 0)[:, None])  # [M, labels of view d]
        share = hits / hits.sum(1, keepdim=True).clamp_min(1e-12)
        for b, (vb, j) in enumerate(keys):
            if vb == d and j < share.shape[1]:
                A[:, b] = share[:, j]
    sym = 0.5 * (A + A.T)
    parent = list(range(M))
    views = [{keys[a][0]} for a in range(M)]  # views each group holds
    ia, ib = torch.triu_indices(M, M, 1)
    vals = sym[ia, ib]
    for t in torch.argsort(vals, descending=True).tolist():
        if float(vals[t]) < min_affinity:
            break
        ra, rb = _find(parent, int(ia[t])), _find(parent, int(ib[t]))
        if ra != rb and not views[ra] & views[rb]:
            parent[rb] = ra
            views[ra] |= views[rb]
    glob: dict[int, int] = {}
    out = masks.clone()
    for a, (c, i) in enumerate(keys):  # keys are in (view, local id) order
        k = glob.setdefault(_find(parent, a), len(glob) + 1)
        maps[c][i] = k
        out[c][masks[c] == i] = k
    return out, maps
