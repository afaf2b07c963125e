"""Mip-NeRF 360 / 3DGS dataset folders: root/sparse/0, root/images_N/, root/point_cloud/iteration_*/,
and the hold-out rule shared by training and evaluation (`held_out`)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from gsrender.io.cameras import Camera
from gsrender.io.colmap import load_colmap_cameras
from gsrender.io.paths import safe_join
from gsrender.io.ply import load_ply
from gsrender.sfm.manifest import read_manifest

_IMAGES_RE = re.compile(r"^images(?:_(\d+))?$")
_ITER_RE = re.compile(r"^iteration_(\d+)$")


def _image_size(path: Path) -> tuple[int, int]:
    import imageio.v3 as iio

    try:
        shape = iio.improps(path).shape  # reads the header only for PNG/JPEG
    except (OSError, ValueError, RuntimeError) as e:  # what imageio/Pillow raise for unreadable files
        raise ValueError(f"{path}: cannot read image size ({e})") from None
    return int(shape[1]), int(shape[0])


def held_out(names: list[str], every: int = 8, photos: list[str] | None = None) -> list[bool]:
    """Which of the views `names` (the registered images, sorted by name) are test views.

    Without photos: every `every`-th view (index % every == 0, LLFF / 3DGS --eval style; none
    when there is a single view). photos: every photo of the capture sorted by name (`gsrender
    prepare`'s manifest), of which the views are those SfM registered: the test views are then
    the photos whose index among all of them is a multiple of `every`, registered or not, as the
    Mip-NeRF 360 protocol counts them, so an unregistered photo does not shift the split."""
    if int(every) != every or every < 1:
        raise ValueError(f"every must be a positive integer, got {every}")
    if photos is None:
        return [i % every == 0 and len(names) > 1 for i in range(len(names))]
    index = {name: i for i, name in enumerate(photos)}
    missing = [n for n in names if n not in index]
    if missing:
        raise ValueError(f"photos: the manifest does not list the views {missing[:5]}")
    return [index[n] % every == 0 for n in names]


def latest_point_cloud(root: str | os.PathLike, prefer: int | None = None) -> Path | None:
    """root/point_cloud/iteration_<prefer>/point_cloud.ply when it exists, else the highest
    iteration's (compared as numbers), or None."""
    pc = Path(root) / "point_cloud"
    if not pc.is_dir():
        return None
    if prefer is not None and (pc / f"iteration_{int(prefer)}" / "point_cloud.ply").is_file():
        return pc / f"iteration_{int(prefer)}" / "point_cloud.ply"
    best = None
    for d in pc.iterdir():
        m = _ITER_RE.match(d.name)
        if m and (d / "point_cloud.ply").is_file() and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), d / "point_cloud.ply")
    return None if best is None else best[1]


def load_mipnerf360_scene(root: str | os.PathLike, images: str = "images_4", split: str = "test",
                          llff_hold: int = 8, model_root: str | os.PathLike | None = None,
                          iteration: int | None = None) -> dict:
    """dict(cameras=list[Camera], model=GaussianModel | None, image_paths=list[Path],
    manifest=dict | None) for one split.

    The model is model_root/point_cloud/iteration_<iteration>/point_cloud.ply (model_root defaults
    to root: 3DGS writes its outputs to a separate folder per scene), falling back to the latest
    iteration there.

    Cameras are sorted by image name; the test split is every llff_hold-th one (idx % llff_hold == 0),
    as in 3DGS's --eval, or, for a scene made by `gsrender prepare` (root/prepare.json), every
    llff_hold-th photo of all that the manifest lists, registered or not (`held_out`). Intrinsics are scaled from the full-resolution COLMAP cameras to the actual
    image size per axis (fx·w/W, as 3DGS does by keeping the field of view), or to the nominal
    round(W/N) × round(H/N) when the image folder is absent.
    """
    root = Path(root)
    m = _IMAGES_RE.match(images)
    if not m:
        raise ValueError(f"images: expected 'images' or 'images_N', got {images!r}")
    factor = int(m.group(1) or 1)
    if factor < 1:
        raise ValueError(f"images: downscale factor must be >= 1, got {images!r}")
    if split not in ("test", "train", "all"):
        raise ValueError(f"split: expected 'test', 'train' or 'all', got {split!r}")
    if int(llff_hold) != llff_hold or llff_hold < 1:
        raise ValueError(f"llff_hold: must be a positive integer, got {llff_hold}")
    sparse = root / "sparse" / "0"
    if not sparse.is_dir():
        raise ValueError(f"root: no COLMAP model at {sparse}")
    image_dir = safe_join(root, images, "images")
    cams = load_colmap_cameras(sparse, images_dir=image_dir)  # full resolution, sorted by name
    manifest = read_manifest(root)
    if split != "all":
        test = split == "test"
        mask = held_out([c.name for c in cams], llff_hold, manifest["photos"] if manifest else None)
        cams = [c for c, m in zip(cams, mask) if m == test]

    out: list[Camera] = []
    for c in cams:
        if image_dir.is_dir():
            if not c.image_path.is_file():
                raise ValueError(f"root: image {c.name!r} listed in {sparse} is missing from {image_dir}")
            w, h = _image_size(c.image_path)
        else:
            w, h = round(c.width / factor), round(c.height / factor)
        out.append(c if (w, h) == (c.width, c.height) else c.resized(w, h))
    cams = out

    ply = latest_point_cloud(root if model_root is None else model_root, prefer=iteration)
    return {"cameras": cams, "model": None if ply is None else load_ply(ply),
            "image_paths": [c.image_path for c in cams], "manifest": manifest}
