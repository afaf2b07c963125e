"""The box masks of scripts/voda_snowmiku_demo.py (the real-capture demo of `gsrender voda
--colmap`): the box's frame comes from the cameras alone, and holes of the splatted SfM points
are filled."""
from __future__ import annotations

import math

import torch

from scripts.voda_snowmiku_demo import _fill_holes, box_frame


def _look_at(eye: torch.Tensor, target: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """World-to-camera [4,4], OpenCV axes (x right, y down, z forward)."""
    z = target - eye
    z = z / z.norm()
    x = torch.linalg.cross(z, up)
    x = x / x.norm()
    y = torch.linalg.cross(z, x)
    R = torch.stack([x, y, z])
    vm = torch.eye(4)
    vm[:3, :3], vm[:3, 3] = R, -R @ eye
    return vm


def test_box_frame_is_the_cameras_aim_and_up():
    target, up = torch.tensor([0.3, -0.2, 1.1]), torch.tensor([0.0, 0.0, 1.0])
    eyes = [target + torch.tensor([2 * math.cos(a), 2 * math.sin(a), 0.8])
            for a in torch.linspace(-0.8, 0.8, 7).tolist()]  # an arc in front of the object
    vm = torch.stack([_look_at(e, target, up) for e in eyes])
    origin, axes = box_frame(vm)
    assert torch.allclose(origin, target, atol=1e-4)
    # the cameras look down by ~22°, so minus their mean y axis (and with it the box) leans
    # back by about that much: the frame is the rig's, not gravity's
    assert float(axes[2] @ up) > 0.9
    assert torch.allclose(axes @ axes.T, torch.eye(3), atol=1e-5)
    assert float(axes[0] @ torch.tensor([1.0, 0.0, 0.0])) > 0.9  # front: towards the arc
    assert abs(float(axes[1] @ torch.tensor([0.0, 1.0, 0.0]))) > 0.99


def test_fill_holes_keeps_what_touches_the_border():
    m = torch.zeros(12, 12, dtype=torch.bool)
    m[2:9, 2:9] = True
    m[4:6, 4:6] = False        # a hole: filled
    m[0:3, 10] = True          # a stroke at the border stays as it is
    out = _fill_holes(m)
    assert bool(out[2:9, 2:9].all()) and bool(out[0:3, 10].all())
    assert int(out.sum()) == 49 + 3
