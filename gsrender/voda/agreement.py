"""Multi-view agreement readout: a Gaussian belongs to object k only if, over the training views
where it contributes, the α-weighted share of its labelled pixels that carry label k exceeds
one half. A readout on top of any method's selection (the study's `[agree]` rows): it needs no
training, only the training masks and the renderer's contributors."""
from __future__ import annotations

import torch

from gsrender.voda.clusters import depth_contributors, rendered_only

QUORUM = 0.5
K_READOUT = 512  # contributors listed per pixel: the renderer's list rarely gets this long
CHUNK = 4096     # pixels per contributors call


def label_shares(views, n_classes: int, K_max: int = K_READOUT, chunk: int = CHUNK):
    """views: gsrender.voda.train.FrozenView list (meta, labels [H,W] with −1 unlabelled).
    -> (shares [N, n_classes]: Σα over a Gaussian's labelled pixels with each label / Σα over all
    its labelled pixels, 0 for a Gaussian no labelled pixel sees; truncated: pixels whose
    renderer list filled all K_max entries, so a contributor may be missing)."""
    N = views[0].meta["means2d"].shape[1]
    acc = torch.zeros(N * n_classes, dtype=torch.float64)
    truncated = 0
    for v in views:
        ys, xs = torch.nonzero(v.labels >= 0, as_tuple=True)
        for s in range(0, ys.numel(), chunk):
            y, x = ys[s:s + chunk], xs[s:s + chunk]
            pix = torch.stack([x, y], -1).to(torch.int32)[None]
            c = rendered_only(depth_contributors(v.meta, v.width, v.height, pix, K_max))
            truncated += int((c.n_render >= K_max).sum())
            valid = c.valid[0]
            lab = v.labels[y, x][:, None].expand(valid.shape)[valid]
            acc.index_add_(0, c.ids[0][valid].long() * n_classes + lab,
                           c.alphas[0][valid].to(torch.float64))
    acc = acc.view(N, n_classes)
    shares = acc / acc.sum(1, keepdim=True).clamp_min(1e-30)
    return shares.to(torch.float32), truncated


def agree(selected: torch.Tensor, shares: torch.Tensor, object_id: int,
          quorum: float = QUORUM) -> torch.Tensor:
    """bool [N]: the selected Gaussians whose label share for object_id exceeds quorum."""
    return selected & (shares[:, object_id] > quorum)
