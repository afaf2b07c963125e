"""Localization metrics (docs/design.md §7): camera-centre translation error, rotation error
arccos((tr(RᵀR̂)−1)/2), medians and recalls over ALL queries (a failure counts as infinite)."""
from __future__ import annotations

import math

import numpy as np

RECALL_THRESHOLDS = ((0.01, 1.0), (0.02, 2.0), (0.05, 5.0))  # (metres, degrees)


def pose_errors(R_gt, t_gt, R_est, t_est) -> tuple[float, float]:
    """(translation error of the camera centre in scene units, rotation error in degrees) of one
    world-to-camera pose estimate."""
    R_gt, R_est = np.asarray(R_gt, np.float64), np.asarray(R_est, np.float64)
    c_gt = -R_gt.T @ np.asarray(t_gt, np.float64)
    c_est = -R_est.T @ np.asarray(t_est, np.float64)
    cos = (np.trace(R_gt.T @ R_est) - 1.0) / 2.0
    return float(np.linalg.norm(c_gt - c_est)), math.degrees(math.acos(float(np.clip(cos, -1, 1))))


def summarize(t_err, r_err, thresholds=RECALL_THRESHOLDS) -> dict:
    """Medians (cm, deg) and recalls over every query; failed queries carry inf errors.
    t_err in metres (scene units), r_err in degrees."""
    t = np.asarray(t_err, np.float64)
    r = np.asarray(r_err, np.float64)
    if t.shape != r.shape or t.ndim != 1:
        raise ValueError(f"t_err and r_err must be 1-D of equal length, got {t.shape}, {r.shape}")
    n = max(t.size, 1)
    out = {"median_t_cm": float(np.median(t) * 100) if t.size else math.inf,
           "median_r_deg": float(np.median(r)) if r.size else math.inf}
    for tm, rd in thresholds:
        key = f"recall_{round(tm * 100)}cm{round(rd)}deg"
        out[key] = float(np.sum((t <= tm) & (r <= rd)) / n)
    return out
