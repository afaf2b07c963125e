"""Procedural 3DGS scenes and camera rigs for tests, demos and benchmarks.

World frame (used everywhere in this package): right-handed, **+z is up**, the ground is the plane
z = 0. This matches the Mip-NeRF 360 garden points in ../shared/data (their cameras' "down" axis is
about world −z). Cameras follow gsrender.cameras (OpenCV world-to-camera viewmats, principal point
at the image centre); its intrinsics, look_at, orbit_cameras and camera JSON are re-exported here.

Everything is deterministic: randomness comes from a seeded CPU ``torch.Generator`` (plus NumPy's
seeded Generator for Beta draws, which torch cannot seed), and all tensors are float32 on the CPU
(object ids int64).

Scenes are surfaces covered by flat Gaussians (the shortest axis along the surface normal, like
trained 3DGS on opaque surfaces): a textured ground, walls, and labelled objects (spheres, boxes,
tori, cylinders) with ids 1..n_objects; background is id 0.

gaussians  seeded generators, flat Gaussians on surface samples, quaternions, SH from colours
textures   value noise, checkerboards, HSV colours
shapes     ground, walls, objects, sky dome, clutter
scenes     make_scene, the Mip-NeRF 360-like PRESETS and make_preset
garden     garden_scene: the real garden points of gsplat's tests
rigs       hemisphere rings, forward trajectories, project_points
(The Removal-3D scenes of VODA build on this package: gsrender.voda.removal3d.make_removal3d; the
application studies' trained-model scenes too: studies/scenes.py, outside the package.)
"""
from gsrender.cameras import WORLD_UP, intrinsics, look_at, orbit_cameras
from gsrender.geometry import quat_to_rotmat
from gsrender.io.camera_json import cameras_from_json, cameras_to_json
from gsrender.synthetic.garden import garden_scene
from gsrender.synthetic.gaussians import quat_multiply, random_quats
from gsrender.synthetic.rigs import forward_trajectory, hemisphere_rings, project_points
from gsrender.synthetic.scenes import FEATURE_KINDS, PRESETS, make_preset, make_scene
from gsrender.synthetic.shapes import OBJECT_KINDS, ground_plane, object_blob, object_half_height, walls
from gsrender.synthetic.textures import checker_texture, value_noise

__all__ = ["FEATURE_KINDS", "OBJECT_KINDS", "PRESETS", "WORLD_UP", "cameras_from_json", "cameras_to_json",
           "checker_texture", "forward_trajectory", "garden_scene", "ground_plane", "hemisphere_rings",
           "intrinsics", "look_at", "make_preset", "make_scene", "object_blob", "object_half_height",
           "orbit_cameras", "project_points", "quat_multiply", "quat_to_rotmat", "random_quats",
           "value_noise", "walls"]
