"""What the viewer draws: one gsrender.rasterize call per frame, turned into the picture of a
render mode (RGB, expected depth, alpha, feature PCA, object labels) plus a depth map that lets
viser hide its own objects (the camera frustums) behind the splats."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from gsrender import viz
from gsrender.contract import MAX_FEATURES
from gsrender.io.cameras import Camera
from gsrender.scene import GaussianModel
from gsrender.views import render_view

MODES = {"rgb": "RGB", "depth": "expected depth", "alpha": "alpha", "features": "features (PCA)",
         "labels": "labels (object ids)"}
# viser stores composite depth as 24-bit fixed point with 1e-5 steps: 167.77 is its far end
FAR_DEPTH = 167.0


def available_modes(model: GaussianModel) -> list[str]:
    """The mode keys this model can show: features need feat_* columns, labels an object_id
    column (with at most MAX_FEATURES distinct ids, one rendered channel each)."""
    modes = ["rgb", "depth", "alpha"]
    if model.features is not None:
        modes.append("features")
    if model.object_ids is not None and torch.unique(model.object_ids).numel() <= MAX_FEATURES:
        modes.append("labels")
    return modes


def label_palette(n: int) -> np.ndarray:
    """[n, 3] float colours, distinct for neighbouring indices (matplotlib's tab20, repeated)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    return np.array([cmap(i % 20)[:3] for i in range(n)], dtype=np.float32)


@dataclass
class Frame:
    image: np.ndarray  # [H, W, 3] uint8
    depth: np.ndarray  # [H, W] float32 camera z for compositing (FAR_DEPTH where nothing is)
    ms: float  # render + conversion time


class FrameRenderer:
    """Holds the model being shown (swappable while others render, for live training) and what
    its modes derive from it: the one-hot label channels and one PCA basis, fitted on the first
    features frame so that every later view is coloured alike."""

    def __init__(self, model: GaussianModel, device: torch.device, raster_mode: str = "sorted"):
        self.device, self.raster_mode = device, raster_mode
        self._lock = threading.Lock()
        self.set_model(model)

    def set_model(self, model: GaussianModel) -> None:
        model = model.to(device=self.device, dtype=torch.float32)
        labels = None
        if "labels" in available_modes(model):
            values, index = torch.unique(model.object_ids, return_inverse=True)
            onehot = torch.nn.functional.one_hot(index, values.numel()).to(self.device, torch.float32)
            labels = replace(model, features=onehot)  # [N, L] channels, one per id
        with self._lock:
            self.model, self._labels, self._pca = model, labels, None
            self.modes = available_modes(model)

    def render(self, cam: Camera, mode: str) -> Frame:
        with self._lock:
            model, labels, pca = self.model, self._labels, self._pca
        if mode not in self.modes:
            raise ValueError(f"mode: {mode!r} is not available for this scene (has {self.modes})")
        t0 = time.perf_counter()
        src = labels if mode == "labels" else model
        with torch.no_grad():
            out = render_view(src, cam, self.device, mode=self.raster_mode,
                              features=mode in ("features", "labels"))
        alpha = out.alphas[0]  # [H, W, 1]
        if mode == "rgb":
            img = out.colors[0]
        elif mode == "depth":
            img = viz.depth_to_color(out.depths[0], alpha)
        elif mode == "alpha":
            img = alpha.expand(-1, -1, 3)
        elif mode == "features":
            if pca is None:
                pca = viz.pca_basis(out.features[0], alpha)
                with self._lock:
                    self._pca = pca if self.model is model else self._pca
            img = viz.feature_pca(out.features[0], alpha, basis=pca)
        else:
            img = self._label_image(out.features[0], alpha)
        a = alpha[..., 0].cpu().numpy()
        z = out.depths[0, ..., 0].cpu().numpy()
        depth = np.where(a >= viz.ALPHA_MIN, z / np.maximum(a, viz.ALPHA_MIN), FAR_DEPTH)
        image = viz.to_uint8(img)
        return Frame(image=image, depth=depth.astype(np.float32),
                     ms=(time.perf_counter() - t0) * 1e3)

    @staticmethod
    def _label_image(onehot: torch.Tensor, alpha: torch.Tensor) -> np.ndarray:
        """Each pixel's dominant label (argmax of the rendered one-hot channels) in its colour;
        background (alpha < viz.ALPHA_MIN) black."""
        idx = onehot.argmax(-1).cpu().numpy()  # [H, W]
        img = label_palette(onehot.shape[-1])[idx]
        img[alpha[..., 0].cpu().numpy() < viz.ALPHA_MIN] = 0.0
        return img
