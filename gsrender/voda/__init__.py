"""VODA: depth-aware volumetric supervision for 3D segmentation of Gaussians (docs/design.md §7).

clusters  per-pixel contributors and their depth clusters (the `contributors` op), F_c
loss      the VODA objective (cluster choice c*, volumetric and boundary-weighted pixel losses)
baselines the baselines VODA plugs into (identity, + 3D kNN, view-dependent distillation, voting)
train     the training loop shared by the benchmark and the CLI
select    per-Gaussian selection, object removal and extraction
metrics   Removal-3D metrics (RDE, nRDE, collateral, Gaussian IoU, recall, 2D mIoU, boundary IoU)
removal3d the Removal-3D scene generator and SAM-like mask noise
composite the composite Removal-3D object: the real trained plant (data/plant) in the room
associate cross-view id association of per-view instance masks (`gsrender voda --associate`)
"""
from gsrender.voda.clusters import Contributors, cluster_features, cluster_stats, depth_contributors
from gsrender.voda.loss import VodaConfig, voda_loss

__all__ = ["Contributors", "VodaConfig", "cluster_features", "cluster_stats", "depth_contributors",
           "voda_loss"]
