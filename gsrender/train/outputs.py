"""What `gsrender train` leaves in its output folder, in the layout of the original 3DGS code
(which its viewers, gsplat's tools, official checkpoints and benchmarks/mipnerf360.py share):
point_cloud/iteration_N/point_cloud.ply, cameras.json and cfg_args."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from gsrender.io.atomic import write_text
from gsrender.io.ply import save_ply
from gsrender.scene import GaussianModel
from gsrender.train.data import Dataset, View


def ply_path(out: str | Path, step: int) -> Path:
    return Path(out) / "point_cloud" / f"iteration_{step}" / "point_cloud.ply"


def _camera_entry(i: int, v: View) -> dict:
    """3DGS's camera_to_JSON: the camera centre and the camera-to-world rotation, focal lengths
    in pixels."""
    c2w = torch.linalg.inv(v.viewmat.detach().double().cpu())
    K = v.K.detach().double().cpu()
    return {"id": i, "img_name": Path(v.name).stem, "width": v.width, "height": v.height,
            "position": c2w[:3, 3].tolist(), "rotation": c2w[:3, :3].tolist(),
            "fy": float(K[1, 1]), "fx": float(K[0, 0])}


def cameras_json(data: Dataset) -> str:
    """The held-out cameras first, then the training ones (3DGS's order)."""
    return json.dumps([_camera_entry(i, v) for i, v in enumerate(data.test + data.train)])


def cfg_args(args, data: Dataset, out: Path) -> str:
    """3DGS's cfg_args line (a Namespace repr its renderers parse for sh_degree, white_background,
    source_path, images and eval)."""
    return (f"Namespace(sh_degree={args.sh_degree}, source_path={str(data.meta.get('source', ''))!r}, "
            f"model_path={str(out)!r}, images={data.meta.get('images', 'images')!r}, resolution=-1, "
            f"white_background={args.background == 'white'}, data_device='cpu', eval={bool(data.test)})")


def write_outputs(out: Path, model: GaussianModel, step: int, args, data: Dataset) -> Path:
    """The model at `step` and the run's cameras and configuration; returns the PLY's path."""
    path = ply_path(out, step)
    save_ply(path, model)
    write_text(out / "cameras.json", cameras_json(data))
    write_text(out / "cfg_args", cfg_args(args, data, out))
    return path
