"""Selecting an object's Gaussians from learnt per-Gaussian features, and removing / extracting
them from a scene."""
from __future__ import annotations

import torch

from gsrender.scene import GaussianModel


def select_object(baseline, object_id: int, threshold: float | None = None) -> torch.Tensor:
    """bool [N]: Gaussians whose best class is object_id and whose score for it exceeds
    threshold (the baseline's select_threshold by default: a probability for classifiers, a
    cosine for distillation). Requiring the best class keeps out never-trained Gaussians whose
    random feature merely leans towards the object's prototype."""
    thr = baseline.select_threshold if threshold is None else float(threshold)
    with torch.no_grad():
        scores = baseline.class_scores()
    if not 0 <= object_id < scores.shape[1]:
        raise ValueError(f"object_id must be in [0, {scores.shape[1]}), got {object_id}")
    return (scores[:, object_id] > thr) & (scores.argmax(1) == object_id)


def _mask(model: GaussianModel, selected: torch.Tensor) -> torch.Tensor:
    if selected.dtype != torch.bool or selected.shape != (model.num_gaussians,):
        raise ValueError(f"selected must be a bool [N={model.num_gaussians}] tensor, got "
                         f"{selected.dtype} {tuple(selected.shape)}")
    return selected


def remove(model: GaussianModel, selected: torch.Tensor) -> GaussianModel:
    """The scene without the selected Gaussians."""
    return model.subset(~_mask(model, selected))


def extract(model: GaussianModel, selected: torch.Tensor) -> GaussianModel:
    """The selected Gaussians alone."""
    return model.subset(_mask(model, selected))
