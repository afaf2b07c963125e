"""Object boxes of a real scene, carved from 2-D boxes (studies.voda.real_objects)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from gsrender.cameras import orbit_cameras
from studies.voda import real_objects as R

W, H = 320, 240


def _cameras(n=12):
    vms, Ks = orbit_cameras(n, 6.0, 2.0, width=W, height_px=H)  # up = +z
    return {f"c{i}": R.PhotoCamera(f"c{i}", W, H, Ks[i].double().numpy(), vms[i].double().numpy(),
                                   np.zeros(0)) for i in range(n)}


def _bbox(cam, pts):
    uv, _ = cam.project(pts)
    return [*uv.min(0).tolist(), *uv.max(0).tolist()]


def test_carving_boxes_from_three_views_recovers_a_cube_on_a_floor():
    rng = np.random.default_rng(0)
    cube = rng.uniform(-0.5, 0.5, (4000, 3)) * [1.0, 0.6, 0.8] + [0.3, -0.2, 0.4]  # [P, 3]
    floor = np.c_[rng.uniform(-4, 4, (20000, 2)), np.zeros(20000)]  # beside and under the cube
    cube = cube[cube[:, 2] > 0.02]
    xyz = np.concatenate([cube, floor])
    cams = _cameras()
    assert np.allclose(np.abs(R.up_axis(list(cams.values()))), [0, 0, 1], atol=1e-6)
    views = {n: _bbox(cams[n], cube) for n in ("c0", "c4", "c8")}  # 120° apart
    mask = R.carve(xyz, views, cams)
    assert mask[:len(cube)].all()  # every point of the object survives
    box = R.fit_box(xyz[mask], R.up_axis(list(cams.values())))
    inside = box.contains(xyz)
    assert inside[:len(cube)].mean() > 0.95
    # the floor just below the cube's footprint is what the boxes cannot tell apart (it lies in
    # every view's box): it stays a thin layer at the bottom, nothing farther than that
    assert np.abs(floor[inside[len(cube):]][:, :2] - [0.3, -0.2]).max() < 0.8
    np.testing.assert_allclose(np.sort(2 * box.half), [0.6, 0.8, 1.0], atol=0.06)


def test_a_box_edge_on_the_image_border_does_not_constrain():
    """An object cut by the photo's edge goes on beyond it: points projecting outside the image
    on that side are kept; an edge inside the image constrains."""
    cam = _cameras()["c0"]
    cams = {"c0": cam}
    # a point 6 units in front of the camera that projects 50 px right of the image
    ray = np.linalg.solve(cam.K, [W + 50.0, H / 2, 1.0]) * 6.0
    R_, t = cam.viewmat[:3, :3], cam.viewmat[:3, 3]
    outside = (R_.T @ (ray - t))[None]  # [1, 3]
    assert cam.project(outside)[0][0, 0] > W
    assert R.carve(outside, {"c0": [W / 2, 0, W, H]}, cams).all()  # right edge on the border
    assert not R.carve(outside, {"c0": [W / 2, 0, W - 10, H]}, cams).any()  # an edge inside
    behind = (R_.T @ (-ray - t))[None]  # behind the camera: never inside
    assert not R.carve(behind, {"c0": [0, 0, W, H]}, cams).any()


def test_too_few_carved_points_name_the_cause():
    with pytest.raises(ValueError, match="too few"):
        R.fit_box(np.zeros((3, 3)), np.array([0.0, 0.0, 1.0]))


def test_the_committed_bonsai_boxes_are_what_their_annotations_carve():
    from gsrender.io.colmap import load_colmap_points

    folder = R.scene_dir("bonsai")
    doc = json.loads((folder / "objects.json").read_text())
    xyz, _ = load_colmap_points(folder / "sfm_model")
    boxes = R.compute_boxes(doc, xyz.astype(np.float64), R.load_cameras(folder / "sfm_model"))
    assert [o["name"] for o in doc["objects"]] == ["bonsai", "table", "cardboard_box"]
    for o in doc["objects"]:
        box, n = boxes[o["name"]]
        committed = R.Box3D.from_json(o["box"])
        assert n == o["sfm_points"]
        np.testing.assert_allclose(box.corners(), committed.corners(), atol=1e-6)
    # the bonsai sits on the table: its box's bottom near the table box's top, and it is the first
    bonsai, table = (R.Box3D.from_json(o["box"]) for o in doc["objects"][:2])
    up = table.axes[2]
    top_of_table = table.centre @ up + table.half[2]
    bottom_of_bonsai = bonsai.centre @ up - bonsai.half[2]
    assert abs(top_of_table - bottom_of_bonsai) < 0.3 * 2 * bonsai.half[2]


def test_a_gaussian_in_two_boxes_belongs_to_the_first():
    from studies.voda.real import object_ids

    eye = np.eye(3)
    boxes = {"pot": R.Box3D(np.zeros(3), eye, np.full(3, 1.0)),
             "table": R.Box3D(np.array([0.0, 0.0, -1.5]), eye, np.array([2.0, 2.0, 1.0]))}
    means = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, -0.8], [0.0, 0.0, -2.0], [5.0, 0.0, 0.0]])
    assert object_ids(means, boxes).tolist() == [1, 1, 2, 0]
