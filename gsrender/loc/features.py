"""2D keypoints + descriptors for lifting and querying. The default backend is OpenCV SIFT
(RootSIFT-normalised, no weights to download); any callable with the same signature plugs in
(e.g. a learned dense descriptor sampled at its own keypoints).

Extractor signature: fn(image uint8 [H,W,3] RGB) -> (keypoints float32 [P,2], descriptors
float32 [P,D]), keypoints in gsrender's pixel convention (pixel (x, y) has its centre at
(x+0.5, y+0.5)) and descriptors L2-normalised."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

Extractor = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


class SiftExtractor:
    """OpenCV SIFT at up to n_features keypoints (contrast threshold 0.01, half OpenCV's
    default: rendered and real low-contrast surfaces give several times more keypoints), RootSIFT
    descriptors (L1, sqrt: their dot
    product is the Hellinger kernel, which matches better than raw SIFT's)."""

    def __init__(self, n_features: int = 2000, contrast_threshold: float = 0.01):
        import cv2

        self.cv2 = cv2
        self.sift = cv2.SIFT_create(nfeatures=int(n_features),
                                    contrastThreshold=float(contrast_threshold))

    def __call__(self, image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        image = as_uint8_image(image)
        gray = self.cv2.cvtColor(image, self.cv2.COLOR_RGB2GRAY)
        kps, desc = self.sift.detectAndCompute(gray, None)
        if desc is None or not kps:
            return np.zeros((0, 2), np.float32), np.zeros((0, 128), np.float32)
        # OpenCV puts pixel centres at integer coordinates; gsrender at +0.5
        pts = np.array([k.pt for k in kps], np.float32) + 0.5
        desc = desc / np.maximum(desc.sum(1, keepdims=True), 1e-12)
        desc = np.sqrt(desc)
        desc /= np.maximum(np.linalg.norm(desc, axis=1, keepdims=True), 1e-12)
        return pts, desc.astype(np.float32)


def as_uint8_image(image) -> np.ndarray:
    """RGB uint8 [H,W,3] from uint8 or float-in-[0,1] arrays/tensors."""
    if hasattr(image, "detach"):
        image = image.detach().cpu().numpy()
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"image must have shape [H, W, 3], got {list(image.shape)}")
    if image.dtype != np.uint8:
        image = (np.clip(image, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return np.ascontiguousarray(image)


def check_features(kps, desc, where: str) -> tuple[np.ndarray, np.ndarray]:
    kps, desc = np.asarray(kps, np.float32), np.asarray(desc, np.float32)
    if kps.ndim != 2 or kps.shape[1] != 2 or desc.ndim != 2 or desc.shape[0] != kps.shape[0]:
        raise ValueError(f"{where}: the extractor must return keypoints [P,2] and descriptors "
                         f"[P,D], got {list(kps.shape)} and {list(desc.shape)}")
    return kps, desc
