"""Scores a trained baseline on a scene with ground-truth object ids: per object, select, remove
and measure (metrics.removal_metrics), plus the 2D segmentation quality of the rendered features.
Shared by studies/voda/removal3d.py and `gsrender voda`."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from gsrender.scene import GaussianModel
from gsrender.voda import metrics as M
from gsrender.voda.agreement import agree
from gsrender.voda.select import select_object
from gsrender.voda.train import project_views, render_features

KEYS = ("rde", "nrde", "collateral", "gaussian_iou", "recall_q1", "miou", "boundary_iou")
# the per-object removal figures evaluate averages (and keeps per object)
OBJECT_KEYS = ("rde", "rde_raw", "nrde", "rde_change", "nrde_change", "collateral", "gaussian_iou",
               "recall_q1")


@dataclass
class EvalViews:
    """Held-out views of a scene and what every method's evaluation shares."""

    viewmats: torch.Tensor
    Ks: torch.Tensor
    width: int
    height: int
    masks: torch.Tensor         # [C,H,W] long clean instance ids
    full: tuple                 # (ED, alpha) of the whole scene
    expected: dict              # object id -> (ED, alpha) without its true Gaussians
    contribution: torch.Tensor  # [N] Σ renderer weights over the views
    metas: list                 # per-view raster meta for feature renders
    seen: dict | None = None    # object id -> [C,H,W] bool surfaces a training view saw


def eval_views(model: GaussianModel, n_objects: int, viewmats, Ks, width: int, height: int,
               masks: torch.Tensor) -> EvalViews:
    full = M.expected_depth(model, viewmats, Ks, width, height)
    expected = {k: M.expected_depth(model.subset(model.object_ids != k), viewmats, Ks, width, height)
                for k in range(1, n_objects + 1)}
    contrib = M.contributions(model, viewmats, Ks, width, height)
    return EvalViews(viewmats, Ks, width, height, masks, full, expected, contrib,
                     project_views(model, viewmats, Ks, width, height))


def selections(baseline, objects, readout: torch.Tensor | None = None) -> list[torch.Tensor]:
    """Per object id, the bool [N] selection evaluate scores (readout as evaluate's)."""
    sel = [select_object(baseline, k) for k in objects]
    return sel if readout is None else [agree(s, readout, k) for s, k in zip(sel, objects)]


def evaluate(model: GaussianModel, baseline, ev: EvalViews, objects=None,
             readout: torch.Tensor | None = None) -> dict:
    """Mean over objects (1..n by default) of the removal metrics, and the 2D mIoU / boundary
    IoU of the baseline's segmentation of its rendered feature maps on the eval views; "objects":
    each object's own removal figures {id: {key: value}}.
    readout [N, n_classes]: label shares (gsrender.voda.agreement) that the selection must agree
    with."""
    objects = list(ev.expected) if objects is None else list(objects)
    rows = []
    for k, sel in zip(objects, selections(baseline, objects, readout)):
        truth = model.object_ids == k
        rows.append(M.removal_metrics(model, sel, truth, ev.viewmats, ev.Ks, ev.width, ev.height,
                                      ev.masks == k, full=ev.full, expected=ev.expected[k],
                                      contribution=ev.contribution,
                                      seen=None if ev.seen is None else ev.seen[k]))
    keys = (*OBJECT_KEYS, *(("rde_seen", "nrde_seen") if ev.seen is not None else ()))
    out = {key: sum(r[key] for r in rows) / max(len(rows), 1) for key in keys}
    out["objects"] = {k: {key: r[key] for key in keys} for k, r in zip(objects, rows)}
    with torch.no_grad():
        seg = torch.cat([baseline.segment(render_features(m, baseline.features, ev.width,
                                                          ev.height)) for m in ev.metas])
    out["miou"] = M.miou(seg, ev.masks)
    out["boundary_iou"] = sum(M.boundary_iou(seg == k, ev.masks == k) for k in objects) / max(
        len(objects), 1)
    return out
