"""File IO: 3DGS PLY and .splat scenes, COLMAP models, Mip-NeRF 360 folders, camera JSON."""
from gsrender.io.camera_json import load_cameras_json, read_cameras_json, save_cameras_json
from gsrender.io.cameras import Camera, lens_arguments, stack_cameras
from gsrender.io.colmap import (
    load_colmap_cameras,
    load_colmap_points,
    read_colmap_model,
    write_colmap_binary,
    write_colmap_text,
)
from gsrender.io.mipnerf360 import load_mipnerf360_scene
from gsrender.io.paths import safe_join
from gsrender.io.ply import load_ply, save_ply
from gsrender.io.splat import load_splat, save_splat

__all__ = [
    "Camera",
    "lens_arguments",
    "load_cameras_json",
    "load_colmap_cameras",
    "load_colmap_points",
    "load_mipnerf360_scene",
    "load_ply",
    "load_splat",
    "read_cameras_json",
    "read_colmap_model",
    "safe_join",
    "save_cameras_json",
    "save_ply",
    "save_splat",
    "stack_cameras",
    "write_colmap_binary",
    "write_colmap_text",
]
