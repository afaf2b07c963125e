"""torch.library.opcheck of every gsrender op on small float32 and float64 inputs.

opcheck's default test_utils: test_schema (the schema's mutation/alias claims hold),
test_autograd_registration (autograd is registered for the inputs that require grad),
test_faketensor (the fake impls in gsrender/ops.py agree with the kernels in shape, dtype and
strides) and test_aot_dispatch_dynamic (tracing with dynamic shapes and backward through AOT
autograd give the eager results).

Every op passes all four, bin_tiles included: its fake impl gives flatten_ids a data-dependent
size (ctx.new_dynamic_size()), which every test accepts. One test is replaced, not skipped:
test_aot_dispatch_dynamic cannot run on project_fwd because of the opcheck harness itself — it sums
the outputs into `sm = 0; sm += out.sum().abs()`, and project_fwd's first output (radii) is
int32, so sm becomes an integer tensor and the in-place add of the first float output fails
("result type Float can't be cast to the desired output type Long"). The same check (AOT
autograd with dynamic shapes, outputs and gradients against eager) is done by hand below.
"""
from __future__ import annotations

import pytest
import torch

from gsrender import _C  # noqa: F401  (registers torch.ops.gsrender.*)
from gsrender import ops as _ops  # noqa: F401  (fake impls and autograd registrations)

OPS = torch.ops.gsrender
F32, F64 = torch.float32, torch.float64
W, H, TILE = 24, 20, 8
WEIGHT_PARAMS = [0.05, 1.0, 1e-3]
ALL_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor",
             "test_aot_dispatch_dynamic")
dtypes = pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])


def _scene(dtype, N: int = 7, C: int = 2):
    """Gaussians in front of C slightly different cameras, several overlapping each tile."""
    g = torch.Generator().manual_seed(0)
    means = 0.6 * torch.randn(N, 3, generator=g, dtype=dtype)
    means[:, 2] += 4.0
    quats = torch.randn(N, 4, generator=g, dtype=dtype)
    scales = 0.1 + 0.3 * torch.rand(N, 3, generator=g, dtype=dtype)
    opac = 0.2 + 0.7 * torch.rand(N, generator=g, dtype=dtype)
    vm = torch.eye(4, dtype=dtype).repeat(C, 1, 1)
    vm[1, :3, 3] = torch.tensor([0.3, -0.1, 0.2], dtype=dtype)
    Ks = torch.tensor([[22.0, 0, W / 2], [0, 21.0, H / 2], [0, 0, 1]], dtype=dtype).repeat(C, 1, 1)
    return means, quats, scales, opac, vm, Ks


def _grad(*ts):
    return tuple(t.detach().clone().requires_grad_() for t in ts)


def _randn(g, *shape, dtype):
    return torch.randn(*shape, generator=g, dtype=dtype)


def _projected(dtype, antialiased=True):
    means, quats, scales, opac, vm, Ks = _scene(dtype)
    radii, m2d, depths, conics, o2d = OPS.project_fwd(means, quats, scales, opac, vm, Ks, W, H, 0.3,
                                                      0.01, 1e10, 0.0, antialiased)
    assert (radii > 0).any(dim=-1).sum() >= 8, "the scene should be mostly visible"
    return radii, m2d, depths, conics, o2d


def _raster_inputs(dtype, mode: int, bg: bool):
    radii, m2d, depths, conics, o2d = _projected(dtype)
    offsets, ids = OPS.bin_tiles(m2d, radii, depths, W, H, TILE, mode == 0)
    C, N = m2d.shape[:2]
    g = torch.Generator().manual_seed(1)
    colors = torch.rand(C, N, 5, generator=g, dtype=dtype)
    backgrounds = torch.rand(C, 5, generator=g, dtype=dtype) if bg else None
    return m2d, conics, o2d, colors, depths, backgrounds, offsets, ids


def _opcheck(op, args, utils=ALL_UTILS):
    res = torch.library.opcheck(op, args, test_utils=utils)
    assert all(v == "SUCCESS" for v in res.values()), res


# ------------------------------------------------------------------------------- projection


@dtypes
@pytest.mark.parametrize("antialiased", [False, True])
def test_opcheck_project_fwd(dtype, antialiased):
    means, quats, scales, opac, vm, Ks = _scene(dtype)
    args = (*_grad(means, quats, scales, opac, vm), Ks, W, H, 0.3, 0.01, 1e10, 0.0, antialiased)
    # test_aot_dispatch_dynamic: see the module docstring and the test below
    _opcheck(OPS.project_fwd, args, ALL_UTILS[:3])


@dtypes
def test_project_fwd_aot_dispatch_dynamic_by_hand(dtype):
    """What opcheck's test_aot_dispatch_dynamic checks, for project_fwd: AOT autograd with dynamic
    shapes gives eager's outputs, and the same gradients of the sum of every float output."""
    means, quats, scales, opac, vm, Ks = _scene(dtype)

    def f(means, quats, scales, opac, vm, Ks):
        return OPS.project_fwd(means, quats, scales, opac, vm, Ks, W, H, 0.3, 0.01, 1e10, 0.0, True)

    compiled = torch.compile(f, backend="aot_eager", dynamic=True, fullgraph=True)
    for n in (7, 5):  # a second size runs the dynamic-shape graph without recompiling
        ins_e = (*_grad(means[:n], quats[:n], scales[:n], opac[:n], vm), Ks)
        ins_c = (*_grad(means[:n], quats[:n], scales[:n], opac[:n], vm), Ks)
        out_e, out_c = f(*ins_e), compiled(*ins_c)
        for a, b in zip(out_e, out_c):
            torch.testing.assert_close(b, a, rtol=0, atol=0)
        sum(o.sum() for o in out_e[1:]).backward()
        sum(o.sum() for o in out_c[1:]).backward()
        for a, b in zip(ins_e[:5], ins_c[:5]):
            torch.testing.assert_close(b.grad, a.grad, rtol=0, atol=0)
            assert a.grad.abs().sum() > 0


@dtypes
def test_opcheck_project_bwd(dtype):
    means, quats, scales, opac, vm, Ks = _scene(dtype)
    radii = _projected(dtype)[0]
    C, N = radii.shape[:2]
    g = torch.Generator().manual_seed(2)
    grads = (_randn(g, C, N, 2, dtype=dtype), _randn(g, C, N, dtype=dtype),
             _randn(g, C, N, 3, dtype=dtype), _randn(g, C, N, dtype=dtype))
    _opcheck(OPS.project_bwd, (means, quats, scales, opac, vm, Ks, W, H, 0.3, True, radii, *grads))


# ------------------------------------------------------------------------ spherical harmonics


@dtypes
@pytest.mark.parametrize("degree,K", [(0, 1), (1, 4), (2, 16), (3, 16)])
def test_opcheck_sh_fwd(dtype, degree, K):
    g = torch.Generator().manual_seed(3)
    dirs, coeffs = _grad(_randn(g, 2, 6, 3, dtype=dtype), _randn(g, 6, K, 3, dtype=dtype))
    _opcheck(OPS.sh_fwd, (degree, dirs, coeffs))


@dtypes
def test_opcheck_sh_bwd(dtype):
    g = torch.Generator().manual_seed(4)
    dirs, coeffs, v = (_randn(g, 2, 6, 3, dtype=dtype), _randn(g, 6, 16, 3, dtype=dtype),
                       _randn(g, 2, 6, 3, dtype=dtype))
    _opcheck(OPS.sh_bwd, (3, dirs, coeffs, v))


@dtypes
@pytest.mark.parametrize("features", [None, "shared", "per_camera"])
def test_opcheck_sh_channels_fwd(dtype, features):
    g = torch.Generator().manual_seed(5)
    means, campos, coeffs, depths = _grad(_randn(g, 6, 3, dtype=dtype), _randn(g, 2, 3, dtype=dtype),
                                          _randn(g, 6, 16, 3, dtype=dtype),
                                          _randn(g, 2, 6, dtype=dtype))
    feats = None if features is None else _grad(
        _randn(g, *((6, 4) if features == "shared" else (2, 6, 4)), dtype=dtype))[0]
    _opcheck(OPS.sh_channels_fwd, (3, means, campos, coeffs, depths, feats))


@dtypes
def test_opcheck_sh_channels_bwd(dtype):
    g = torch.Generator().manual_seed(6)
    means, campos, coeffs, v = (_randn(g, 6, 3, dtype=dtype), _randn(g, 2, 3, dtype=dtype),
                                _randn(g, 6, 16, 3, dtype=dtype), _randn(g, 2, 6, 7, dtype=dtype))
    _opcheck(OPS.sh_channels_bwd, (3, means, campos, coeffs, v))


# ----------------------------------------------------------------------------------- binning


@dtypes
@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize("tile", [TILE, 16])
def test_opcheck_bin_tiles(dtype, sort, tile):
    """flatten_ids has a data-dependent length; the fake impl's unbacked size passes all four."""
    radii, m2d, depths, _, _ = _projected(dtype)
    _opcheck(OPS.bin_tiles, (m2d, radii, depths, W, H, tile, sort))


@dtypes
def test_opcheck_bin_tiles_no_intersections(dtype):
    radii, m2d, depths, _, _ = _projected(dtype)
    _opcheck(OPS.bin_tiles, (m2d, torch.zeros_like(radii), depths, W, H, TILE, True))


# ------------------------------------------------------------------------------ rasterization


RASTER_CASES = [  # (mode, precision): sorted matrix, sorted scalar, weighted matrix
    pytest.param(0, "auto", id="sorted-matrix"), pytest.param(0, "fp32", id="sorted-scalar"),
    pytest.param(1, "auto", id="weighted")]


@dtypes
@pytest.mark.parametrize("mode,precision", RASTER_CASES)
@pytest.mark.parametrize("bg", [True, False], ids=["bg", "nobg"])
def test_opcheck_rasterize_fwd(dtype, mode, precision, bg):
    m2d, conics, o2d, colors, depths, backgrounds, offsets, ids = _raster_inputs(dtype, mode, bg)
    diff = _grad(m2d, conics, o2d, colors, depths) + (_grad(backgrounds)[0] if bg else None,)
    _opcheck(OPS.rasterize_fwd, (*diff, offsets, ids, W, H, TILE, mode, WEIGHT_PARAMS, precision))


@dtypes
@pytest.mark.parametrize("mode", [0, 1], ids=["sorted", "weighted"])
@pytest.mark.parametrize("bg", [True, False], ids=["bg", "nobg"])
def test_opcheck_rasterize_bwd(dtype, mode, bg):
    ins = _raster_inputs(dtype, mode, bg)
    common = (*ins, W, H, TILE, mode, WEIGHT_PARAMS)
    render, alphas, last_ids, aux, _, plan = OPS.rasterize_fwd(*common)
    g = torch.Generator().manual_seed(5)
    v_render, v_alphas = _randn(g, *render.shape, dtype=dtype), _randn(g, *alphas.shape, dtype=dtype)
    _opcheck(OPS.rasterize_bwd, (*common, render, alphas, last_ids, aux, v_render, v_alphas, plan))
