"""Training data: posed target images (COLMAP folder or a rendered synthetic scene), the LLFF
held-out split, the SfM points for initialisation and the scene extent for learning rates."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from gsrender.geometry import camera_centers
from gsrender.io.cameras import Camera, lens_arguments
from gsrender.io.colmap import load_colmap_cameras, load_colmap_points
from gsrender.io.mipnerf360 import held_out
from gsrender.io.paths import safe_join
from gsrender.scene import sh_to_rgb
from gsrender.sfm.manifest import read_manifest


@dataclass
class View:
    """One posed target image: viewmat [4,4] world-to-camera, K [3,3], image [H,W,3] in [0,1],
    camera_model the lens ("pinhole", "ortho", "fisheye"; docs/cameras.md) and its distortion
    coefficients (Camera.distortion: rendered through the unscented transform)."""

    name: str
    viewmat: torch.Tensor
    K: torch.Tensor
    image: torch.Tensor
    camera_model: str = "pinhole"
    distortion: dict = field(default_factory=dict)

    @property
    def width(self) -> int:
        return int(self.image.shape[1])

    @property
    def height(self) -> int:
        return int(self.image.shape[0])


@dataclass
class Dataset:
    train: list[View]
    test: list[View]
    points: tuple[torch.Tensor, torch.Tensor] | None = None  # (xyz [P,3], rgb [P,3] uint8)
    meta: dict = field(default_factory=dict)

    @property
    def extent(self) -> float:
        return camera_extent([v.viewmat for v in self.train])


def batch_camera_model(views: list[View]) -> str:
    """The one camera_model of a batch of views (the renderer takes one per call)."""
    models = {v.camera_model for v in views}
    if len(models) != 1:
        raise ValueError(f"views: one batch mixes camera models {sorted(models)}")
    return models.pop()


def batch_lens(views: list[View]) -> dict:
    """rasterize's lens keywords for a batch of views: camera_model, and with_ut with the
    coefficient tensors when a view has distortion (io.lens_arguments)."""
    return {"camera_model": batch_camera_model(views),
            **lens_arguments([v.distortion for v in views], views[0].K.device)}


def camera_extent(viewmats: list[torch.Tensor]) -> float:
    """3DGS's spatial scale (getNerfppNorm): 1.1 × the largest distance of a camera centre from
    their mean. It scales the position learning rate and the densification size thresholds."""
    vm = torch.stack([v.double() for v in viewmats])  # [C, 4, 4]
    centres = camera_centers(vm)  # [C, 3]
    radius = (centres - centres.mean(0)).norm(dim=-1).max()
    return float(radius) * 1.1 if float(radius) > 0 else 1.0


def holdout_indices(n: int, every: int = 8, n_test: int | None = None) -> list[int]:
    """Held-out view indices: every `every`-th (LLFF style, index % every == 0), or, with
    n_test, n_test views spread evenly over the sequence."""
    if n_test is not None:
        if not 0 <= n_test < n:
            raise ValueError(f"n_test must be in [0, {n - 1}] for {n} views, got {n_test}")
        return sorted({round((i + 0.5) * n / n_test - 0.5) for i in range(n_test)})
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    return [i for i in range(n) if i % every == 0] if n > 1 else []


def split(views: list[View], every: int = 8, n_test: int | None = None,
          photos: list[str] | None = None) -> tuple[list[View], list[View]]:
    """(train, test) views. photos: every photo of the capture sorted by name (`gsrender
    prepare`'s manifest), of which the views are the ones SfM registered: the hold-out then
    counts every `every`-th photo, registered or not, as the Mip-NeRF 360 protocol does, so an
    unregistered photo does not shift the split."""
    if photos is not None and n_test is None:  # the rule benchmarks/mipnerf360.py evaluates with
        test = {i for i, t in enumerate(held_out([v.name for v in views], every, photos)) if t}
    else:
        test = set(holdout_indices(len(views), every, n_test))
    return ([v for i, v in enumerate(views) if i not in test],
            [v for i, v in enumerate(views) if i in test])


def _read_image(path: Path, width: int, height: int) -> torch.Tensor:
    import cv2
    import imageio.v3 as iio

    img = np.asarray(iio.imread(path))
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=2)
    img = img[..., :3]  # drop alpha
    if img.dtype != np.uint8:
        raise ValueError(f"{path}: expected an 8-bit image, got {img.dtype}")
    if img.shape[:2] != (height, width):
        img = cv2.resize(img, (width, height), interpolation=cv2.INTER_AREA)
    return torch.from_numpy(np.ascontiguousarray(img)).float() / 255.0  # [H, W, 3]


def load_colmap_dataset(root: str | os.PathLike, images: str = "images", scale: float = 1.0,
                        every: int = 8, n_test: int | None = None,
                        device: torch.device | str = "cpu") -> Dataset:
    """root/sparse/0 + root/<images>: cameras sorted by name, images resized by `scale` (<= 1),
    SfM points from points3D, held-out split as `split` (over every photo `gsrender prepare`
    listed in root/prepare.json, when it is there)."""
    root = Path(root)
    sparse = root / "sparse" / "0"
    if not sparse.is_dir():
        raise ValueError(f"root: no COLMAP model at {sparse}")
    if not 0 < scale <= 1:
        raise ValueError(f"scale must lie in (0, 1], got {scale}")
    image_dir = safe_join(root, images, "images")
    cams: list[Camera] = load_colmap_cameras(sparse, images_dir=image_dir)
    views = []
    for c in cams:
        if not c.image_path.is_file():
            raise ValueError(f"root: image {c.name!r} of {sparse} is missing from {image_dir}")
        w, h = max(1, round(c.width * scale)), max(1, round(c.height * scale))
        c = c.resized(w, h) if (w, h) != (c.width, c.height) else c
        views.append(View(c.name, c.viewmat.to(device), c.K.to(device),
                          _read_image(c.image_path, w, h).to(device), c.model, c.distortion))
    xyz, rgb = load_colmap_points(sparse)
    manifest = read_manifest(root)
    train, test = split(views, every, n_test, photos=manifest["photos"] if manifest else None)
    return Dataset(train, test, (torch.from_numpy(xyz).to(device), torch.from_numpy(rgb).to(device)),
                   meta={"source": str(root), "images": images, "scale": scale})


def synthetic_dataset(n_gaussians: int = 2000, n_views: int = 16, width: int = 96, height: int = 72,
                      n_points: int = 1000, every: int = 8, seed: int = 0, n_objects: int = 3,
                      device: torch.device | str = "cpu") -> Dataset:
    """Targets rendered from gsrender.synthetic.make_scene by orbit cameras; the 'SfM points' are a
    random subset of the true means (jittered) with their colours, as a COLMAP run would give."""
    from gsrender.render import rasterize
    from gsrender.synthetic import make_scene, orbit_cameras

    model = make_scene(n_gaussians, n_objects=n_objects, seed=seed)
    vms, Ks = orbit_cameras(n_views, 5.0, 2.0, target=(0.0, 0.0, 0.4), width=width,
                            height_px=height, fov_deg=60.0)
    with torch.no_grad():
        out = rasterize(model.means, model.quats, model.scales, model.opacities, model.sh, vms, Ks,
                        width, height, sh_degree=model.sh_degree)
    views = [View(f"view_{i:03d}", vms[i].to(device), Ks[i].to(device),
                  out.colors[i].clamp(0, 1).to(device)) for i in range(n_views)]
    g = torch.Generator().manual_seed(seed + 1)
    pick = torch.randperm(model.num_gaussians, generator=g)[:n_points]
    xyz = model.means[pick] + 0.02 * torch.randn(pick.numel(), 3, generator=g)
    rgb = (sh_to_rgb(model.sh[pick, 0]).clamp(0, 1) * 255).round().to(torch.uint8)
    train, test = split(views, every)
    return Dataset(train, test, (xyz.to(device), rgb.to(device)),
                   meta={"source": "synthetic", "n_gaussians": n_gaussians, "seed": seed})

