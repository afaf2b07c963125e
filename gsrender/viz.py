"""Turning renders into pictures: uint8 conversion, depth colouring, feature PCA, PNG writing and
a contact sheet. Everything returns NumPy arrays [H,W,3] in [0,1] (or uint8 from to_uint8), so
it works the same for CPU and CUDA renders."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

# Pixels whose alpha is below this count as background (black) in depth and feature images:
# there the expected depth / feature is a division by almost nothing.
ALPHA_MIN = 0.05
# PCA is fitted on at most this many pixels (a deterministic stride through the valid ones):
# the D×D covariance of a 1080p, D=256 image would otherwise cost ~1e11 flops for no gain.
_PCA_MAX_FIT = 65536


def _np(x, name: str) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().to("cpu")
        x = x.float() if x.is_floating_point() else x
        return x.numpy()
    if isinstance(x, np.ndarray):
        return x
    raise TypeError(f"{name}: expected a torch.Tensor or numpy.ndarray, got {type(x).__name__}")


def _hw(x: np.ndarray, name: str) -> np.ndarray:
    """[H,W] or [H,W,1] -> [H,W]."""
    if x.ndim == 3 and x.shape[-1] == 1:
        x = x[..., 0]
    if x.ndim != 2:
        raise ValueError(f"{name}: expected shape [H,W] or [H,W,1], got {list(x.shape)}")
    return x


def _mask(alpha, shape: tuple, alpha_min: float) -> np.ndarray:
    """bool [H,W]: the pixels that show something (all of them when alpha is None)."""
    if alpha is None:
        return np.ones(shape, dtype=bool)
    a = _hw(_np(alpha, "alpha"), "alpha")
    if a.shape != shape:
        raise ValueError(f"alpha: shape {list(a.shape)} does not match the image's {list(shape)}")
    return np.isfinite(a) & (a >= alpha_min)


def to_uint8(img) -> np.ndarray:
    """Float image in [0,1] (values outside are clipped, NaN -> 0) or uint8 -> uint8, same shape
    except that a trailing single channel is dropped ([H,W,1] -> [H,W], which PNG writers want).
    Accepts a torch.Tensor (any device) or a NumPy array."""
    a = _np(img, "img")
    if a.ndim == 3 and a.shape[-1] == 1:
        a = a[..., 0]
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[-1] not in (3, 4)):
        raise ValueError(f"img: expected [H,W], [H,W,1], [H,W,3] or [H,W,4], got {list(a.shape)}")
    if a.dtype == np.uint8:
        return a
    if a.dtype == np.bool_:
        return a.astype(np.uint8) * 255
    a = np.nan_to_num(a.astype(np.float32), nan=0.0, posinf=1.0, neginf=0.0)
    return (np.clip(a, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def _colormap(name: str):
    import matplotlib

    try:
        return matplotlib.colormaps[name]
    except KeyError:
        raise ValueError(f"cmap: unknown matplotlib colormap {name!r}") from None


def depth_to_color(depth, alpha=None, *, cmap: str = "turbo", percentiles=(2.0, 98.0),
                   divide_by_alpha: bool = True, alpha_min: float = ALPHA_MIN) -> np.ndarray:
    """Colour-mapped depth [H,W,3] float32 in [0,1]; near is warm (red end of turbo), far is cool.

    depth [H,W] or [H,W,1]: the renderer's depth output Σ wᵢzᵢ; with divide_by_alpha (default)
    it becomes the expected depth Σ wᵢzᵢ / alpha. The colour range is the given percentiles of the
    valid pixels (robust to a few very near or far ones). Pixels with alpha < alpha_min (or no
    finite depth) are black.
    """
    d = _hw(_np(depth, "depth"), "depth").astype(np.float64)
    valid = _mask(alpha, d.shape, alpha_min)
    if divide_by_alpha and alpha is not None:
        a = _hw(_np(alpha, "alpha"), "alpha").astype(np.float64)
        d = np.divide(d, a, out=np.zeros_like(d), where=valid)
    valid &= np.isfinite(d)
    out = np.zeros(d.shape + (3,), dtype=np.float32)
    if not valid.any():
        return out
    lo, hi = np.percentile(d[valid], [float(percentiles[0]), float(percentiles[1])])
    t = np.clip((d - lo) / max(hi - lo, 1e-12), 0.0, 1.0)
    rgb = _colormap(cmap)(1.0 - t)[..., :3]  # [H, W, 3]; 1 - t: near = high end of the map
    out[valid] = rgb[valid]
    return out


def _valid_features(features, alpha, alpha_min: float):
    f = _np(features, "features")
    if f.ndim != 3 or f.shape[-1] < 1:
        raise ValueError(f"features: expected shape [H,W,D] with D >= 1, got {list(f.shape)}")
    valid = _mask(alpha, f.shape[:2], alpha_min) & np.isfinite(f).all(-1)
    return f, valid


def pca_basis(features, alpha=None, *, percentiles=(1.0, 99.0), alpha_min: float = ALPHA_MIN) -> dict | None:
    """The 3-component PCA of a feature image's valid pixels, to colour several views alike:
    {"mean" [D], "components" [D,k] (k = min(3, D)), "lo" [k], "hi" [k]} (float64), or None when
    no pixel is valid. Deterministic: an eigendecomposition of the covariance, each component's
    sign fixed so its largest-magnitude loading is positive."""
    f, valid = _valid_features(features, alpha, alpha_min)
    if not valid.any():
        return None
    x = torch.from_numpy(np.ascontiguousarray(f[valid], dtype=np.float64))  # [P, D]
    fit = x[:: max(1, x.shape[0] // _PCA_MAX_FIT)]
    mean = fit.mean(0)  # [D]
    cov = (fit - mean).T @ (fit - mean) / max(fit.shape[0] - 1, 1)  # [D, D]
    _, vecs = torch.linalg.eigh(cov)  # ascending eigenvalues
    comps = vecs[:, -min(3, f.shape[-1]):].flip(-1)  # [D, k], largest variance first
    sign = torch.sign(comps.gather(0, comps.abs().argmax(0, keepdim=True)))  # [1, k]
    comps = comps * torch.where(sign == 0, torch.ones_like(sign), sign)
    proj = ((x - mean) @ comps).numpy()  # [P, k]
    lo, hi = np.percentile(proj, [float(percentiles[0]), float(percentiles[1])], axis=0)  # [k] each
    return {"mean": mean.numpy(), "components": comps.numpy(), "lo": lo, "hi": hi}


def feature_pca(features, alpha=None, *, basis: dict | None = None, percentiles=(1.0, 99.0),
                alpha_min: float = ALPHA_MIN) -> np.ndarray:
    """Feature image [H,W,D] -> [H,W,3] float32 in [0,1]: the first three principal components of
    the valid pixels' features, each stretched to its percentile range (see pca_basis; pass a
    basis from another view to colour views consistently). D < 3 fills the missing components
    with 0. Pixels with alpha < alpha_min are black."""
    f, valid = _valid_features(features, alpha, alpha_min)
    H, W, D = f.shape
    out = np.zeros((H, W, 3), dtype=np.float32)
    if basis is None:
        basis = pca_basis(f, alpha, percentiles=percentiles, alpha_min=alpha_min)
        if basis is None:
            return out
    if basis["mean"].shape != (D,):
        raise ValueError(f"basis: fitted on D={basis['mean'].shape[0]} features, the image has D={D}")
    if not valid.any():
        return out
    proj = (f[valid].astype(np.float64) - basis["mean"]) @ basis["components"]  # [P, k]
    proj = np.clip((proj - basis["lo"]) / np.maximum(basis["hi"] - basis["lo"], 1e-12), 0.0, 1.0)
    k = proj.shape[1]
    vals = np.zeros((proj.shape[0], 3), dtype=np.float32)
    vals[:, :k] = proj
    out[valid] = vals
    return out


def save_image(path: str | os.PathLike, img) -> Path:
    """Writes img (float [0,1] or uint8; [H,W], [H,W,1], [H,W,3] or [H,W,4]) as PNG/JPEG/... by
    the path's suffix, creating parent folders. Returns the path."""
    import imageio.v3 as iio

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, to_uint8(img))
    return path


def save_contact_sheet(path: str | os.PathLike, rows: list[list], row_labels: list[str] | None = None,
                       col_labels: list[str] | None = None, panel_width_in: float = 2.4,
                       dpi: int = 100) -> Path:
    """A matplotlib grid of images (rows × columns; an entry may be None for an empty panel),
    with optional row and column labels, saved to path. Uses the Agg canvas directly, so it
    neither needs a display nor touches pyplot's global state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not rows or not rows[0]:
        raise ValueError("rows: need at least one row with one image")
    n_rows, n_cols = len(rows), max(len(r) for r in rows)
    first = next(to_uint8(im) for r in rows for im in r if im is not None)
    aspect = first.shape[0] / first.shape[1]
    fig = Figure(figsize=(panel_width_in * n_cols, panel_width_in * aspect * n_rows + 0.3 * n_rows),
                 dpi=dpi)
    FigureCanvasAgg(fig)
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    for i in range(n_rows):
        for j in range(n_cols):
            ax = axes[i][j]
            ax.set_xticks([])
            ax.set_yticks([])
            for s in ax.spines.values():
                s.set_visible(False)
            im = rows[i][j] if j < len(rows[i]) else None
            if im is not None:
                u8 = to_uint8(im)
                ax.imshow(u8, cmap="gray" if u8.ndim == 2 else None, vmin=0, vmax=255,
                          interpolation="nearest")
            if col_labels is not None and i == 0 and j < len(col_labels):
                ax.set_title(col_labels[j], fontsize=9)
            if row_labels is not None and j == 0 and i < len(row_labels):
                ax.set_ylabel(row_labels[i], fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
