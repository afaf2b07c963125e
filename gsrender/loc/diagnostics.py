"""Where a lifted map's error comes from, measured on a localized query with a known pose and
depth: the signed error of the matched map points along the query's viewing direction (a map
whose points sit behind the surface pushes the camera back), which matches land on a sibling
of the right child of a split Gaussian, and the camera's signed displacement along its optical
axis."""
from __future__ import annotations

import numpy as np


def signed_depth_error(points: np.ndarray, gt_points: np.ndarray, viewmat: np.ndarray) -> np.ndarray:
    """[Q] z-depth of map points [Q,3] minus that of their keypoints' true 3-d points [Q,3] in
    the camera viewmat [4,4]: positive = the map point lies behind the surface."""
    vm = np.asarray(viewmat, np.float64)
    z = lambda x: np.asarray(x, np.float64) @ vm[2, :3] + vm[2, 3]
    return z(points) - z(gt_points)


def wrong_sibling(points: np.ndarray, parent_ids: np.ndarray, matched: np.ndarray,
                  gt_points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For matches onto map points matched [Q] (rows of points [M,3], whose unsplit Gaussians are
    parent_ids [M]) with true 3-d points gt_points [Q,3]: (has_sibling [Q] bool: another map point
    comes from the same unsplit Gaussian; wrong [Q] bool: one of those lies nearer to the true
    point than the matched one)."""
    parent_ids = np.asarray(parent_ids)
    matched = np.asarray(matched, np.int64)
    order = np.argsort(parent_ids, kind="stable")
    sorted_parents = parent_ids[order]
    lo = np.searchsorted(sorted_parents, parent_ids[matched], "left")
    hi = np.searchsorted(sorted_parents, parent_ids[matched], "right")
    has = hi - lo > 1
    wrong = np.zeros(len(matched), bool)
    if not has.any():
        return has, wrong
    width = int((hi - lo).max())
    slot = lo[:, None] + np.arange(width)[None]  # [Q,G] positions of each match's family
    in_family = slot < hi[:, None]
    members = order[np.minimum(slot, len(order) - 1)]
    dist = np.linalg.norm(points[members] - gt_points[:, None, :], axis=2)
    own = np.linalg.norm(points[matched] - gt_points, axis=1)
    wrong = (in_family & (members != matched[:, None]) & (dist < own[:, None])).any(1)
    return has, wrong


def axial_displacement(viewmat_gt: np.ndarray, R_est: np.ndarray, t_est: np.ndarray) -> float:
    """Signed displacement of the estimated camera centre along the true optical axis: positive =
    the estimate sits behind the true camera (farther from the scene)."""
    vm = np.asarray(viewmat_gt, np.float64)
    c_gt = -vm[:3, :3].T @ vm[:3, 3]
    c_est = -np.asarray(R_est, np.float64).T @ np.asarray(t_est, np.float64)
    return float(-(c_est - c_gt) @ vm[2, :3])
