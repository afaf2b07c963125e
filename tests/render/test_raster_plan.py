"""The rasterize launch plan (csrc/include/gsrender/raster_plan.h): one choice of the forward and
backward kernels, made in rasterize_fwd from the user's precision and the target, returned as a
CPU tensor and run by rasterize_bwd. The CUDA plans are checked here without a GPU through
_C.plan_raster, the function the op itself calls."""
from __future__ import annotations

import pytest
import torch

import gsrender
from gsrender import _C, ops
from gsrender import render as R
from tests.conftest import F32, F64, random_scene

SM80, SM75 = 8, 7


def _plan(precision, sorted_=True, det=False, cuda=False, float32=True, tile=16, cc=0):
    fwd, bwd = _C.plan_raster(precision, sorted_, det, cuda, float32, tile, cc)
    return ops.KERNELS[fwd], ops.KERNELS[bwd]


def test_python_names_are_the_kernels():
    assert ops.KERNELS == ("scalar", "matrix", "mma_f16", "mma_bf16", "mma_tf32", "scalar_det",
                           "matrix_det")
    assert ops.PRECISIONS == R.PRECISIONS == ("auto", "fp32", "tf32", "fp16", "bf16")


@pytest.mark.parametrize("precision", ["auto", "fp16", "bf16", "tf32"])
def test_cpu_plan(precision):
    # the CPU has no reduced operand types: every matrix precision is its fp32/fp64 GEMM
    for sorted_ in (True, False):
        assert _plan(precision, sorted_) == ("matrix", "matrix")
        assert _plan(precision, sorted_, det=True) == ("matrix", "matrix_det")
    assert _plan("fp32") == ("scalar", "matrix")  # the exact per-pixel 3DGS loop
    assert _plan("fp32", sorted_=False) == ("matrix", "matrix")  # the scalar loop is sorted only


@pytest.mark.parametrize("sorted_", [True, False])
def test_cuda_plan(sorted_):
    cuda = lambda p, **kw: _plan(p, sorted_, cuda=True, cc=kw.pop("cc", SM80), **kw)
    assert cuda("auto") == cuda("fp16") == ("mma_f16", "mma_f16")
    assert cuda("bf16") == ("mma_bf16", "mma_bf16")
    assert cuda("tf32") == ("mma_tf32", "scalar")  # no Tensor Core backward for tf32
    assert cuda("fp32") == ("scalar", "scalar")
    for p in ("auto", "fp32", "bf16", "tf32"):  # a fixed order: the scalar deterministic backward
        assert cuda(p, det=True)[1] == "scalar_det"
    # where the Tensor Cores do not run, every precision is the scalar kernel
    for kw in ({"float32": False}, {"tile": 8}, {"cc": SM75}):
        for p in ("auto", "bf16", "tf32"):
            assert cuda(p, **kw) == ("scalar", "scalar"), (p, kw)


def test_bad_precision_is_named():
    with pytest.raises(ValueError, match="precision"):
        _C.plan_raster("fp8", True, False, False, True, 16, 0)


def _render(**kw):
    s = random_scene(N=30, C=1, width=24, height=20, bg=False).cast(F32)
    leaves = [t.clone().requires_grad_(True) for t in (s.means, s.scales, s.colors)]
    out = gsrender.rasterize(leaves[0], s.quats, leaves[1], s.opacities, leaves[2], s.viewmats,
                             s.Ks, 24, 20, **kw)
    return out, leaves


@pytest.mark.parametrize("kw, want", [
    ({}, ("matrix", "matrix")), ({"precision": "fp32"}, ("scalar", "matrix")),
    ({"deterministic": True}, ("matrix", "matrix_det")),
    ({"mode": "weighted", "precision": "fp32"}, ("matrix", "matrix"))])
def test_rasterize_reports_its_plan(kw, want):
    out, _ = _render(**kw)
    assert out.meta["plan"].device.type == "cpu" and out.meta["plan"].dtype == torch.int64
    plan = gsrender.raster_plan(out.meta)
    assert tuple(plan) == ops.PLAN_FIELDS
    assert (plan["forward"], plan["backward"]) == want
    # the CPU kernels take no device workspace (they allocate their own scratch)
    assert plan["forward_workspace"] == plan["backward_workspace"] == 0


@pytest.mark.parametrize("C, W, H, tile", [(1, 24, 20, 16), (2, 33, 17, 8), (3, 16, 16, 16),
                                           (2, 5, 40, 32), (1, 7, 3, 1)])
def test_plan_tile_grid(C, W, H, tile):
    # the plan's grid is the one the op checked tile_offsets against and ran on: ceil(W / tile) ×
    # ceil(H / tile) tiles per camera
    s = random_scene(N=25, C=C, width=W, height=H, bg=False, seed=C + W).cast(F32)
    out = gsrender.rasterize(s.means, s.quats, s.scales, s.opacities, s.colors, s.viewmats, s.Ks,
                             W, H, tile_size=tile)
    plan = gsrender.raster_plan(out.meta)
    tx, ty = -(-W // tile), -(-H // tile)
    assert (plan["tile_size"], plan["tiles_x"], plan["tiles_y"], plan["tiles"]) == (
        tile, tx, ty, C * tx * ty)
    assert tuple(out.meta["tile_offsets"].shape) == (C, ty, tx)
    assert (out.meta["tile_width"], out.meta["tile_height"]) == (tx, ty)


def _raw_forward(tile=16, W=24, H=20):
    s = random_scene(N=30, C=2, width=W, height=H, bg=False, seed=3).cast(F32)
    out = gsrender.rasterize(s.means, s.quats, s.scales, s.opacities, s.colors, s.viewmats, s.Ks,
                             W, H, tile_size=tile)
    m = out.meta
    colors = torch.cat([out.colors.new_ones(2, 30, 3), m["depths"][..., None]], -1)
    args = (m["means2d"].detach(), m["conics"].detach(), m["opacities"].detach(), colors,
            m["depths"].detach(), None, m["tile_offsets"], m["flatten_ids"], W, H, tile,
            ops.SORTED, [])
    fwd = torch.ops.gsrender.rasterize_fwd(*args, "auto", False)
    return args, fwd


def _raw_backward(args, fwd, plan):
    render, alphas, last_ids, aux = fwd[:4]
    return torch.ops.gsrender.rasterize_bwd(*args, render, alphas, last_ids, aux,
                                            torch.ones_like(render), torch.zeros_like(alphas),
                                            plan)


def test_backward_checks_the_plan_against_its_inputs():
    args, fwd = _raw_forward()
    plan = fwd[5]
    assert plan.shape == (len(ops.PLAN_FIELDS),)
    _raw_backward(args, fwd, plan)  # its own plan runs
    fields = ops.PLAN_FIELDS
    for name, delta in (("tiles_x", 1), ("tiles_y", -1), ("tiles", 2), ("tile_size", 8)):
        bad = plan.clone()
        bad[fields.index(name)] += delta
        with pytest.raises(ValueError, match="plan: its tile grid"):
            _raw_backward(args, fwd, bad)
    bad = plan.clone()
    bad[fields.index("backward_workspace")] = -1
    with pytest.raises(ValueError, match="plan: workspace"):
        _raw_backward(args, fwd, bad)
    with pytest.raises(ValueError, match="plan"):  # the old two-entry plan
        _raw_backward(args, fwd, plan[:2].clone())
    # a plan made for another tile size does not fit these inputs' grid
    _, fwd8 = _raw_forward(tile=8)
    with pytest.raises(ValueError, match="plan: its tile grid"):
        _raw_backward(args, fwd, fwd8[5])



def test_backward_runs_the_planned_kernel():
    # the same forward with a deterministic backward planned: the planned (fixed-order) backward
    # is bitwise reproducible and agrees with the atomic one to rounding
    grads = []
    for det in (True, True, False):
        out, leaves = _render(deterministic=det, features=torch.ones(30, 2))
        (out.colors.sum() + out.features.square().sum()).backward()
        grads.append([x.grad for x in leaves])
    for a, b, c in zip(*grads):
        assert torch.equal(a, b)
        torch.testing.assert_close(a, c, rtol=1e-4, atol=1e-5)


def test_float64_plans_the_cpu_gemm():
    s = random_scene(N=20, C=1, width=16, height=16, bg=False).cast(F64)
    out = gsrender.rasterize(s.means, s.quats, s.scales, s.opacities, s.colors, s.viewmats, s.Ks,
                             16, 16, precision="bf16")
    plan = gsrender.raster_plan(out.meta)
    assert (plan["forward"], plan["backward"]) == ("matrix", "matrix")
