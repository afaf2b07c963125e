"""Localizing a query image against a lifted map (docs/design.md §7 SplitGS-Loc (4)): keypoints and
descriptors, mutual-nearest-neighbour matching with Lowe's ratio test in chunked matrix products
(on the GPU when the map is there), then one PnP + RANSAC solve: PoseLib when importable, else
OpenCV's solvePnPRansac with USAC MAGSAC. No iterative pose refinement."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from gsrender.loc import retrieval as RT
from gsrender.loc.features import Extractor, check_features

DEFAULT_REPROJ_PX = 3.0
DEFAULT_ITERATIONS = 5000
# Fewer RANSAC inliers than this is reported as a failure (a 4–6 point "pose" is chance).
DEFAULT_MIN_INLIERS = 12
# Lowe's ratio (SIFT paper, 2004): a match is kept when its descriptor distance is below this
# share of the distance to the query's second-best map point. Not tuned here.
DEFAULT_RATIO = 0.8


def mutual_nn(query: torch.Tensor, ref: torch.Tensor, chunk: int = 8192,
              min_similarity: float = -1.0, ratio: float | None = None) -> torch.Tensor:
    """Mutual nearest neighbours by dot-product similarity (L2-normalised descriptors).

    query [P,D], ref [M,D] -> matches [Q,2] int64 (query index, ref index): pairs that are each
    other's best match and, with ratio, pass Lowe's test ‖q − r₁‖ < ratio·‖q − r₂‖ against the
    query's second-best r₂ (unit vectors: ‖a − b‖² = 2 − 2a·b; a map of one point passes). The
    reference side is processed in chunks of `chunk` rows so the similarity matrix is never
    held whole; both directions' maxima come from the same products.
    """
    if query.dim() != 2 or ref.dim() != 2 or query.shape[1] != ref.shape[1]:
        raise ValueError(f"query and ref must be [P,D] and [M,D], got {list(query.shape)} and "
                         f"{list(ref.shape)}")
    P, M = query.shape[0], ref.shape[0]
    if P == 0 or M == 0:
        return torch.zeros(0, 2, dtype=torch.int64)
    query = query.to(ref.device, ref.dtype)
    best_q = torch.full((P,), -float("inf"), device=ref.device)  # query's best similarity
    second_q = torch.full((P,), -float("inf"), device=ref.device)  # and its second best
    arg_q = torch.zeros(P, dtype=torch.int64, device=ref.device)
    col_max = torch.empty(M, device=ref.device)  # every map point's best similarity
    for r0 in range(0, M, chunk):
        sim = query @ ref[r0:r0 + chunk].T  # [P, m]
        if ratio is not None and sim.shape[1] >= 2:
            top = sim.topk(2, dim=1)
            v, a, v2 = top.values[:, 0], top.indices[:, 0], top.values[:, 1]
        else:
            (v, a), v2 = sim.max(dim=1), torch.full((P,), -float("inf"), device=ref.device)
        better = v > best_q
        second_q = torch.where(better, torch.maximum(best_q, v2), torch.maximum(second_q, v))
        best_q = torch.where(better, v, best_q)
        arg_q = torch.where(better, a + r0, arg_q)
        # values, not argmax: amax across rows is several times cheaper on the CPU, and the pair
        # (i, j) is mutual exactly when i's best value is j's column maximum
        col_max[r0:r0 + chunk] = sim.amax(dim=0)
    qi = torch.arange(P, device=ref.device)
    ok = (best_q >= col_max[arg_q]) & (best_q >= min_similarity)
    if ratio is not None:
        dist = lambda sim: torch.sqrt((2 - 2 * sim).clamp_min(0))
        ok &= torch.isinf(second_q) | (dist(best_q) < ratio * dist(second_q))
    return torch.stack([qi[ok], arg_q[ok]], dim=1).cpu()


@dataclass
class PoseResult:
    success: bool
    R: np.ndarray  # [3,3] world-to-camera rotation (OpenCV)
    t: np.ndarray  # [3]
    inliers: np.ndarray  # [Q] bool over the matches
    matches: np.ndarray  # [Q,2] (query keypoint, map point)
    keypoints: np.ndarray  # [P,2] the query's keypoints (gsrender pixel convention)
    timings_ms: dict = field(default_factory=dict)

    @property
    def viewmat(self) -> np.ndarray:
        v = np.eye(4)
        v[:3, :3], v[:3, 3] = self.R, self.t
        return v


def solve_pnp(points2d: np.ndarray, points3d: np.ndarray, K: np.ndarray, width: int, height: int,
              *, reproj_px: float = DEFAULT_REPROJ_PX, iterations: int = DEFAULT_ITERATIONS,
              backend: str = "auto", min_inliers: int = DEFAULT_MIN_INLIERS,
              ) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """PnP + RANSAC on 2D (gsrender pixel convention) – 3D correspondences.
    backend: "auto" (PoseLib if importable, else OpenCV), "poselib" or "opencv".
    Returns (success, R [3,3], t [3], inliers [Q] bool); success needs min_inliers inliers."""
    points2d = np.ascontiguousarray(points2d, np.float64).reshape(-1, 2)
    points3d = np.ascontiguousarray(points3d, np.float64).reshape(-1, 3)
    K = np.asarray(K, np.float64)
    Q = points2d.shape[0]
    fail = (False, np.eye(3), np.zeros(3), np.zeros(Q, bool))
    if points3d.shape[0] != Q:
        raise ValueError(f"points2d and points3d must pair up, got {Q} and {points3d.shape[0]}")
    if backend not in ("auto", "poselib", "opencv"):
        raise ValueError(f"backend must be 'auto', 'poselib' or 'opencv', got {backend!r}")
    if Q < max(4, min_inliers):
        return fail
    if backend in ("auto", "poselib"):
        try:
            import poselib
        except ImportError:
            if backend == "poselib":
                raise
        else:
            cam = {"model": "PINHOLE", "width": int(width), "height": int(height),
                   "params": [K[0, 0], K[1, 1], K[0, 2], K[1, 2]]}
            # PoseLib's pixel convention (COLMAP's) matches gsrender's (centres at +0.5);
            # bundle max_iterations 0: no refinement beyond the RANSAC model
            pose, info = poselib.estimate_absolute_pose(
                points2d, points3d, cam, {"max_reproj_error": reproj_px,
                                          "max_iterations": iterations},
                {"max_iterations": 0})
            inl = np.asarray(info.get("inliers", np.zeros(Q, bool)), bool)
            return bool(inl.sum() >= min_inliers), np.asarray(pose.R), np.asarray(pose.t), inl
    import cv2

    # OpenCV's pixel centres are at integer coordinates: shift the principal point to match
    Kcv = K.copy()
    Kcv[0, 2] -= 0.5
    Kcv[1, 2] -= 0.5
    ok, rvec, tvec, inl = cv2.solvePnPRansac(
        points3d, points2d - 0.5, Kcv, None, iterationsCount=int(iterations),
        reprojectionError=float(reproj_px), confidence=0.9999, flags=cv2.USAC_MAGSAC)
    if not ok or inl is None:
        return fail
    mask = np.zeros(Q, bool)
    mask[inl.reshape(-1)] = True
    return bool(mask.sum() >= min_inliers), cv2.Rodrigues(rvec)[0], tvec.reshape(3), mask


def localize(image, K, map_points: torch.Tensor, map_descriptors: torch.Tensor,
             extractor: Extractor, *, reproj_px: float = DEFAULT_REPROJ_PX,
             iterations: int = DEFAULT_ITERATIONS, backend: str = "auto",
             top_k_views: int | None = None, point_views=None, view_descriptors=None,
             codebook=None, ratio: float | None = DEFAULT_RATIO) -> PoseResult:
    """Pose of one query image (RGB [H,W,3]) with intrinsics K [3,3] against the map.
    top_k_views: match only against the points observed in the k training views most similar to
    the query (retrieval; needs the map's point_views, view_descriptors and codebook).
    ratio: Lowe's ratio test on the matches (None: mutual nearest neighbours alone)."""
    H, W = np.asarray(image).shape[:2] if not hasattr(image, "shape") else tuple(image.shape[:2])
    t = {}
    t0 = time.perf_counter()
    kps, desc = check_features(*extractor(image), "image")
    t1 = time.perf_counter()
    t["features"] = (t1 - t0) * 1e3
    qd = torch.from_numpy(desc)
    subset = None
    if top_k_views is not None:
        if point_views is None or view_descriptors is None or codebook is None:
            raise ValueError("top_k_views: the map has no retrieval index (rebuild it)")
        views = RT.top_views(qd, view_descriptors, codebook, top_k_views)
        subset = RT.points_in_views(point_views, views.numpy(), view_descriptors.shape[0])
        m = mutual_nn(qd, map_descriptors[subset], ratio=ratio)
        m[:, 1] = subset[m[:, 1]]
    else:
        m = mutual_nn(qd, map_descriptors, ratio=ratio)
    t2 = time.perf_counter()
    t["matching"] = (t2 - t1) * 1e3
    m_np = m.numpy()
    ok, R, tv, inl = solve_pnp(kps[m_np[:, 0]], map_points[m[:, 1]].cpu().numpy(),
                               np.asarray(K, np.float64), W, H, reproj_px=reproj_px,
                               iterations=iterations, backend=backend)
    t["pnp"] = (time.perf_counter() - t2) * 1e3
    t["total"] = sum(t.values())
    return PoseResult(ok, R, tv, inl, m_np, kps, t)
