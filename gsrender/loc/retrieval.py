"""Retrieval-limited matching: a query is matched only against the map points observed in the k
training views most similar to it, so the matching cost depends on k (and the points per view),
not on the map size.

View similarity: a VLAD global descriptor (residuals of the local descriptors to a small k-means
codebook of the map's descriptors, intra-normalised, signed square root, L2). It is a classic
hand-crafted descriptor that needs no weights; a learned one (NetVLAD, ...) can be stored in the
map's view_descriptors in its place."""
from __future__ import annotations

import numpy as np
import torch

DEFAULT_CODEBOOK = 16


def kmeans_codebook(desc: torch.Tensor, k: int = DEFAULT_CODEBOOK, iters: int = 10,
                    seed: int = 0, sample: int = 50_000) -> torch.Tensor:
    """k spherical k-means centres [k,D] of L2-normalised descriptors [P,D] (seeded)."""
    g = torch.Generator().manual_seed(seed)
    if desc.shape[0] > sample:
        desc = desc[torch.randperm(desc.shape[0], generator=g)[:sample]]
    k = min(k, desc.shape[0])
    c = desc[torch.randperm(desc.shape[0], generator=g)[:k]].clone()
    for _ in range(iters):
        a = (desc @ c.T).argmax(1)
        new = torch.zeros_like(c).index_add_(0, a, desc)
        empty = new.norm(dim=1) == 0
        new[empty] = c[empty]
        c = torch.nn.functional.normalize(new, dim=1)
    return c


def vlad(desc: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """VLAD [k·D] of one image's descriptors [P,D]."""
    k, D = codebook.shape
    if desc.shape[0] == 0:
        return torch.zeros(k * D)
    a = (desc @ codebook.T).argmax(1)
    v = torch.zeros(k, D).index_add_(0, a, desc - codebook[a])
    v = torch.nn.functional.normalize(v, dim=1)  # intra-normalisation
    v = v.sign() * v.abs().sqrt()
    return torch.nn.functional.normalize(v.reshape(-1), dim=0)


def pack_views(gids: torch.Tensor, views: torch.Tensor, n_points: int, n_views: int) -> np.ndarray:
    """Point-in-view table from (point index, view) pairs -> packed bits uint8 [M, ⌈C/8⌉]
    (np.packbits' big-endian bit order), built without the dense [M, C] table."""
    table = np.zeros((n_points, (n_views + 7) // 8), np.uint8)
    v = views.numpy()
    np.bitwise_or.at(table, (gids.numpy(), v // 8), (1 << (7 - v % 8)).astype(np.uint8))
    return table


def points_in_views(point_views: np.ndarray, views, n_views: int) -> torch.Tensor:
    """Indices of the map points observed in any of `views` (reads one bit column per view)."""
    hit = np.zeros(point_views.shape[0], bool)
    for v in np.asarray(views).reshape(-1):
        if not 0 <= v < n_views:
            raise ValueError(f"views: {v} is not a view index in [0, {n_views})")
        hit |= (point_views[:, v // 8] >> (7 - v % 8)) & 1 == 1
    return torch.from_numpy(np.flatnonzero(hit))


def view_index(features: list) -> tuple[torch.Tensor, torch.Tensor]:
    """(codebook [k,D], view descriptors [C,k·D]) from each view's (keypoints, descriptors)."""
    descs = [torch.from_numpy(np.asarray(d, np.float32)) for _, d in features]
    alld = torch.cat(descs) if descs else torch.zeros(0, 128)
    if alld.shape[0] == 0:
        return torch.zeros(0, alld.shape[1]), torch.zeros(len(descs), 0)
    cb = kmeans_codebook(alld)
    return cb, torch.stack([vlad(d, cb) for d in descs])


def top_views(query_desc: torch.Tensor, view_descriptors: torch.Tensor, codebook: torch.Tensor,
              k: int) -> torch.Tensor:
    """The k training views whose global descriptor is most similar to the query's."""
    if k < 1:
        raise ValueError(f"top_k_views must be >= 1, got {k}")
    sim = view_descriptors @ vlad(query_desc, codebook)
    return torch.argsort(sim, descending=True)[:k]
