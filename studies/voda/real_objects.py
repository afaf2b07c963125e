"""Objects of a real scene as oriented 3-D boxes in its SfM frame, carved from 2-D boxes.

An annotator draws an axis-aligned 2-D box around the object in a few photos taken from widely
different directions (data/scenes/<scene>/objects.json, `views`). The object's SfM points are the
ones that project inside its 2-D box in every one of those photos (the visual hull of the boxes,
applied to the point cloud); its 3-D box is their extent in a gravity-aligned frame: up is the
normal of the plane of the camera centres (an orbit capture circles the object at roughly one
height), the horizontal axes the ones that give the least footprint, the bounds robust quantiles
of the points along each axis. Objects are listed in priority order: a Gaussian inside two boxes
belongs to the first (the bonsai's stand stands in the table's cloth). A 2-D box edge on the image border means
"the object goes on beyond the photo": that side does not constrain.

    python -m studies.voda.real_objects [--scene bonsai] [--figure docs/images/bonsai_objects.png]

recomputes every object's 3-D box from its 2-D boxes into objects.json (`box`) and draws each box
over one training photo. The trained Gaussians whose means fall inside a box are that object's
ground-truth set in the Removal-3D study on the real model.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
# the share of carved points allowed outside the box along each axis, at each end: stray SfM
# points that survive the carving (a few behind a thin object) must not stretch the box
OUTLIER_SHARE = 0.01
BORDER_PX = 2.0  # a 2-D box edge this close to the image border is open on that side


@dataclass
class Box3D:
    """An oriented box: centre [3], axes [3, 3] (rows: unit axes, the last one up), half [3]."""

    centre: np.ndarray
    axes: np.ndarray
    half: np.ndarray

    def contains(self, xyz: np.ndarray) -> np.ndarray:
        """[P] bool: which of the points xyz [P, 3] lie inside."""
        local = (np.asarray(xyz, np.float64) - self.centre) @ self.axes.T  # [P, 3]
        return (np.abs(local) <= self.half).all(-1)

    def corners(self) -> np.ndarray:
        """[8, 3], corner i at signs (bit 0, bit 1, bit 2) of the three axes."""
        signs = np.array([[1 if i >> b & 1 else -1 for b in range(3)] for i in range(8)], float)
        return self.centre + (signs * self.half) @ self.axes

    def to_json(self) -> dict:
        return {"centre": self.centre.tolist(), "axes": self.axes.tolist(), "half": self.half.tolist()}

    @classmethod
    def from_json(cls, d: dict) -> Box3D:
        return cls(np.asarray(d["centre"], float), np.asarray(d["axes"], float),
                   np.asarray(d["half"], float))


@dataclass
class PhotoCamera:
    """A photo's pinhole camera with COLMAP's radial term: K [3, 3], viewmat [4, 4] world → camera."""

    name: str
    width: int
    height: int
    K: np.ndarray
    viewmat: np.ndarray
    radial: np.ndarray  # [k1, k2, ...] (zeros: none)

    def project(self, xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(pixels [P, 2], in front [P] bool) of the points xyz [P, 3]."""
        cam = np.asarray(xyz, np.float64) @ self.viewmat[:3, :3].T + self.viewmat[:3, 3]  # [P, 3]
        z = cam[:, 2]
        front = z > 1e-6
        xy = cam[:, :2] / np.where(front, z, 1.0)[:, None]
        r2 = (xy**2).sum(-1)
        factor = 1.0 + sum((k * r2 ** (i + 1) for i, k in enumerate(self.radial)), np.zeros_like(r2))
        xy = xy * factor[:, None]
        uv = xy * np.diag(self.K)[:2] + self.K[:2, 2]
        return uv, front

    def centre(self) -> np.ndarray:
        return -self.viewmat[:3, :3].T @ self.viewmat[:3, 3]


def up_axis(cameras: list[PhotoCamera]) -> np.ndarray:
    """[3] unit: the normal of the camera centres' best-fit plane, pointing away from the side the
    cameras look towards (an orbit looks down at its object)."""
    centres = np.stack([c.centre() for c in cameras])
    normal = np.linalg.svd(centres - centres.mean(0))[2][2]
    forward = np.stack([c.viewmat[2, :3] for c in cameras]).mean(0)
    return -normal if forward @ normal > 0 else normal


def carve(xyz: np.ndarray, views: dict[str, list[float]], cameras: dict[str, PhotoCamera]) -> np.ndarray:
    """[P] bool: the points inside every view's 2-D box [x0, y0, x1, y1] (pixels of that photo)."""
    keep = np.ones(len(xyz), bool)
    for name, (x0, y0, x1, y1) in views.items():
        cam = cameras[name]
        uv, front = cam.project(xyz)
        lo = np.array([-np.inf if x0 <= BORDER_PX else x0, -np.inf if y0 <= BORDER_PX else y0])
        hi = np.array([np.inf if x1 >= cam.width - BORDER_PX else x1,
                       np.inf if y1 >= cam.height - BORDER_PX else y1])
        keep &= front & (uv >= lo).all(-1) & (uv <= hi).all(-1)
    return keep


def fit_box(points: np.ndarray, up: np.ndarray) -> Box3D:
    """The gravity-aligned box of points [P, 3]: of the horizontal orientations (1° apart), the
    one whose trimmed box (bounds at the OUTLIER_SHARE / 1 − OUTLIER_SHARE quantiles along each
    axis) has the least footprint, as a box drawn by hand would sit on a square stand."""
    if len(points) < 10:
        raise ValueError(f"points: {len(points)} carved points, too few for a box (are the 2-D "
                         "boxes of one object, in photos from different directions?)")
    up = up / np.linalg.norm(up)
    e0 = np.cross(up, [1.0, 0.0, 0.0] if abs(up[0]) < 0.9 else [0.0, 1.0, 0.0])
    e0 /= np.linalg.norm(e0)
    e1 = np.cross(up, e0)
    best = None
    for deg in range(90):
        t = np.radians(deg)
        major = np.cos(t) * e0 + np.sin(t) * e1
        axes = np.stack([major, np.cross(up, major), up])
        lo, hi = np.quantile(points @ axes.T, [OUTLIER_SHARE, 1 - OUTLIER_SHARE], axis=0)
        area = (hi[0] - lo[0]) * (hi[1] - lo[1])
        if best is None or area < best[0]:
            best = (area, axes, lo, hi)
    _, axes, lo, hi = best
    return Box3D(centre=((lo + hi) / 2) @ axes, axes=axes, half=(hi - lo) / 2)


def load_cameras(sparse_dir: Path) -> dict[str, PhotoCamera]:
    from gsrender.io.colmap import load_colmap_cameras

    out = {}
    for c in load_colmap_cameras(sparse_dir):
        radial = c.distortion.get("radial_coeffs")
        out[c.name] = PhotoCamera(c.name, c.width, c.height, c.K.double().numpy(),
                                  c.viewmat.double().numpy(),
                                  np.zeros(0) if radial is None else radial.double().numpy())
    return out


def scene_dir(scene: str) -> Path:
    return ROOT / "data" / "scenes" / scene


def load_objects(scene: str = "bonsai") -> dict[str, Box3D]:
    """The scene's objects' 3-D boxes by name, as committed."""
    doc = json.loads((scene_dir(scene) / "objects.json").read_text())
    return {o["name"]: Box3D.from_json(o["box"]) for o in doc["objects"]}


def compute_boxes(doc: dict, xyz: np.ndarray, cameras: dict[str, PhotoCamera]) -> dict[str, tuple[Box3D, int]]:
    """(box, carved points) per object of an objects.json document."""
    missing = {n for o in doc["objects"] for n in o["views"]} - set(cameras)
    if missing:
        raise ValueError(f"objects.json: views {sorted(missing)} are not photos of the SfM model")
    up = up_axis(list(cameras.values()))
    out = {}
    for o in doc["objects"]:
        mask = carve(xyz, o["views"], cameras)
        out[o["name"]] = (fit_box(xyz[mask], up), int(mask.sum()))
    return out


def draw(photo: np.ndarray, cam: PhotoCamera, box: Box3D, label: str) -> np.ndarray:
    """The photo with the box's 12 edges drawn over it."""
    import cv2

    img = np.ascontiguousarray(photo.copy())
    uv, front = cam.project(box.corners())
    if not front.all():
        return img
    for i in range(8):
        for b in range(3):
            j = i ^ (1 << b)
            if j > i:
                cv2.line(img, tuple(int(v) for v in uv[i]), tuple(int(v) for v in uv[j]),
                         (255, 230, 0), 2, cv2.LINE_AA)
    cv2.putText(img, label, (8, 24), cv2.FONT_HERSHEY_SIMPLEX, 0.8, (255, 230, 0), 2, cv2.LINE_AA)
    return img


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scene", default="bonsai")
    p.add_argument("--photos", type=Path, default=None,
                   help="the scene's photos (default: GSRENDER_DATA/<scene>/images)")
    p.add_argument("--figure", type=Path, default=None,
                   help="PNG of every box over a training photo (default docs/images/<scene>_objects.png)")
    args = p.parse_args(argv)
    import imageio.v3 as iio

    from gsrender.io.colmap import load_colmap_points
    from gsrender.io.paths import data_dir

    folder = scene_dir(args.scene)
    path = folder / "objects.json"
    doc = json.loads(path.read_text())
    xyz, _ = load_colmap_points(folder / "sfm_model")
    cameras = load_cameras(folder / "sfm_model")
    boxes = compute_boxes(doc, xyz.astype(np.float64), cameras)
    panels = []
    photos = args.photos or data_dir() / args.scene / "images"
    for o in doc["objects"]:
        box, n = boxes[o["name"]]
        o["box"] = box.to_json()
        o["sfm_points"] = n
        o["size"] = (2 * box.half).round(3).tolist()
        print(f"{o['name']}: {n} SfM points carved, box {o['size']} (scene units)")
        shown = o["shown_in"]
        panels.append(draw(iio.imread(photos / shown), cameras[shown], box, o["name"]))
    path.write_text(json.dumps(doc, indent=1) + "\n")
    figure = args.figure or ROOT / "docs" / "images" / f"{args.scene}_objects.png"
    rows = [np.concatenate(panels[i:i + 2] + [np.zeros_like(panels[0])] * (i + 2 - len(panels)), 1)
            for i in range(0, len(panels), 2)]
    iio.imwrite(figure, np.concatenate(rows, 0)[::2, ::2])
    print(f"wrote {path} and {figure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
