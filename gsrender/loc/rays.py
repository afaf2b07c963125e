"""Rays through image positions: the one camera-geometry helper the map builders, the
association of keypoints to Gaussians and the query evaluation share."""
from __future__ import annotations

import numpy as np


def pixel_rays(kps: np.ndarray, K: np.ndarray, viewmat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Camera centre [3] and world directions [P,3] (z = 1 in the camera) of keypoints [P,2]
    (gsrender pixel convention, as K)."""
    K, vm = np.asarray(K, np.float64), np.asarray(viewmat, np.float64)
    R, t = vm[:3, :3], vm[:3, 3]
    d = np.stack([(kps[:, 0] - K[0, 2]) / K[0, 0], (kps[:, 1] - K[1, 2]) / K[1, 1],
                  np.ones(len(kps))], 1)
    return -R.T @ t, d @ R
