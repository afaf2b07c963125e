"""A compact 3DGS trainer on gsrender's differentiable rasterize(): parameters and
initialisation (params), Adam kept aligned under densification (optim), adaptive density
control (densify) with its id-keyed noise (noise), data and held-out splits (data), the loop
(trainer) and the command (run)."""
from gsrender.train.data import (
    Dataset,
    View,
    camera_extent,
    holdout_indices,
    load_colmap_dataset,
    synthetic_dataset,
)
from gsrender.train.densify import DensifyConfig, GradStats, densify_and_prune, reset_opacity
from gsrender.train.optim import LearningRates
from gsrender.train.params import activated, knn_scales, params_from_model, params_from_points, to_model
from gsrender.train.trainer import TrainConfig, Trainer

__all__ = [
    "Dataset", "DensifyConfig", "GradStats", "LearningRates", "TrainConfig", "Trainer", "View",
    "activated", "camera_extent", "densify_and_prune", "holdout_indices", "knn_scales",
    "load_colmap_dataset", "params_from_model", "params_from_points", "reset_opacity",
    "synthetic_dataset", "to_model",
]
