"""Bad input handling: gsrender.rasterize and the raw ops raise ValueError / TypeError whose
message names the offending argument (docs/design.md §8), never crash, and degenerate-but-valid scenes
(no Gaussians, huge or off-screen Gaussians) render.

Input that once crashed a kernel (last_ids outside its tile run in the raw backward) is run in a
subprocess, so a regression to a crash fails that test instead of taking pytest down.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import gsrender
from gsrender import _C  # noqa: F401  (registers torch.ops.gsrender.*)

OPS = torch.ops.gsrender
REPO = Path(__file__).resolve().parents[2]
F32, F64 = torch.float32, torch.float64
W, H, TILE = 24, 20, 8

# ------------------------------------------------------------------------------------ helpers


def _scene(dtype=F32, N: int = 5, C: int = 2, D: int = 0, sh_degree: int | None = None) -> dict:
    """A small valid rasterize() argument set: N Gaussians ~4 units in front of C cameras."""
    g = torch.Generator().manual_seed(0)
    means = 0.5 * torch.randn(N, 3, generator=g, dtype=dtype)
    means[:, 2] += 4.0
    kw = {
        "means": means,
        "quats": torch.randn(N, 4, generator=g, dtype=dtype),
        "scales": 0.05 + 0.3 * torch.rand(N, 3, generator=g, dtype=dtype),
        "opacities": 0.1 + 0.8 * torch.rand(N, generator=g, dtype=dtype),
        "colors": (torch.rand(N, 3, generator=g, dtype=dtype) if sh_degree is None
                   else torch.randn(N, (sh_degree + 1) ** 2, 3, generator=g, dtype=dtype)),
        "viewmats": torch.eye(4, dtype=dtype).repeat(C, 1, 1),
        "Ks": torch.tensor([[20.0, 0, W / 2], [0, 20.0, H / 2], [0, 0, 1]], dtype=dtype).repeat(C, 1, 1),
        "width": W, "height": H, "sh_degree": sh_degree,
        "features": torch.randn(N, D, generator=g, dtype=dtype) if D else None,
        "backgrounds": torch.rand(C, 3, generator=g, dtype=dtype),
    }
    kw["viewmats"][1:, 0, 3] = 0.3  # the second camera slightly to the side
    return kw


def _render(**over):
    kw = _scene()
    kw.update(over)
    return gsrender.rasterize(**kw)


def _raises(exc, names, fn, *args, **kw):
    """fn(*args, **kw) raises `exc` and the message names every string of `names`."""
    with pytest.raises(exc) as info:
        fn(*args, **kw)
    msg = str(info.value)
    for name in (names,) if isinstance(names, str) else names:
        assert name in msg, f"message does not name {name!r}: {msg!r}"
    return msg


def _with(t: torch.Tensor, index, value) -> torch.Tensor:
    t = t.clone()
    t[index] = value
    return t


def _grow(t: torch.Tensor, dim: int) -> torch.Tensor:
    """t with dimension `dim` one larger (the extra slice copies the first one)."""
    return torch.cat([t, t.narrow(dim, 0, 1)], dim) if t.shape[dim] else t.new_zeros(
        *[1 if d == dim else s for d, s in enumerate(t.shape)])


def _run_isolated(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (a crash there cannot kill pytest)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "2"}
    code = "import resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


TENSOR_ARGS = ("means", "quats", "scales", "opacities", "colors", "viewmats", "Ks", "features",
               "backgrounds")
FLOAT_ARGS = TENSOR_ARGS


def _scene_with_all():
    """Every tensor argument present (features too)."""
    return _scene(D=2)


# ------------------------------------------------------------------------ rasterize(): shapes

BAD_SHAPES = {
    "means": [lambda t: t[:, :2], lambda t: t[None], lambda t: t[0]],
    "quats": [lambda t: t[:, :3], lambda t: _grow(t, 0), lambda t: t[None]],
    "scales": [lambda t: t[:, :2], lambda t: _grow(t, 0), lambda t: t[..., None]],
    "opacities": [lambda t: t[:, None], lambda t: _grow(t, 0), lambda t: t[:0]],
    "colors": [lambda t: t[:, :2], lambda t: _grow(t, 0), lambda t: t[0],
               lambda t: t[None].repeat(3, 1, 1), lambda t: t[None, None]],
    "viewmats": [lambda t: t[:, :3], lambda t: t[0], lambda t: t[:, :, :3]],
    "Ks": [lambda t: t[:, :2], lambda t: _grow(t, 0), lambda t: t[0]],
    "features": [lambda t: _grow(t, 0), lambda t: t[None].repeat(3, 1, 1), lambda t: t[0],
                 lambda t: t[None, None]],
    "backgrounds": [lambda t: t[:, :2], lambda t: _grow(t, 0), lambda t: t[0, :2],
                    lambda t: t[None]],
}


@pytest.mark.parametrize("name,i", [(n, i) for n, fs in BAD_SHAPES.items() for i in range(len(fs))])
def test_rasterize_wrong_shape_names_argument(name, i):
    kw = _scene_with_all()
    kw[name] = BAD_SHAPES[name][i](kw[name])
    _raises(ValueError, name, gsrender.rasterize, **kw)


def test_rasterize_sh_colors_need_three_dims_and_enough_coefficients():
    kw = _scene(sh_degree=2)
    _raises(ValueError, "colors", gsrender.rasterize, **{**kw, "colors": kw["colors"][:, :4]})
    _raises(ValueError, "colors", gsrender.rasterize, **{**kw, "colors": kw["colors"][:, 0]})
    _raises(ValueError, "colors", gsrender.rasterize, **{**kw, "colors": kw["colors"][..., :2]})


# ------------------------------------------------------------------------ rasterize(): dtypes


@pytest.mark.parametrize("name", FLOAT_ARGS)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.float16,
                                   torch.bfloat16, torch.complex64])
def test_rasterize_wrong_dtype_names_argument(name, dtype):
    kw = _scene_with_all()
    kw[name] = kw[name].to(dtype) if dtype != torch.bool else kw[name] > 0
    _raises(TypeError, name, gsrender.rasterize, **kw)


@pytest.mark.parametrize("name", [n for n in FLOAT_ARGS if n != "means"])
@pytest.mark.parametrize("base", [F32, F64])
def test_rasterize_mixed_float_dtypes_name_argument(name, base):
    kw = _scene(dtype=base, D=2)
    kw[name] = kw[name].to(F64 if base == F32 else F32)
    _raises(TypeError, name, gsrender.rasterize, **kw)


# Non-tensor values for tensor arguments.
@pytest.mark.parametrize("name", TENSOR_ARGS)
@pytest.mark.parametrize("kind", ["list", "ndarray", "float"])
def test_rasterize_non_tensor_names_argument(name, kind):
    kw = _scene_with_all()
    t = kw[name]
    kw[name] = {"list": t.tolist(), "ndarray": t.numpy(), "float": 0.5}[kind]
    _raises(TypeError, name, gsrender.rasterize, **kw)


@pytest.mark.parametrize("name", ["means", "quats", "scales", "opacities", "viewmats", "Ks"])
def test_rasterize_none_for_required_tensor_names_argument(name):
    _raises(TypeError, name, _render, **{name: None})


def test_rasterize_none_colors_names_argument():
    _raises(TypeError, "colors", _render, colors=None)


# --------------------------------------------------------------------- rasterize(): NaN / Inf


@pytest.mark.parametrize("name", FLOAT_ARGS)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_rasterize_non_finite_names_argument(name, value, dtype):
    kw = _scene(dtype=dtype, D=2)
    kw[name] = _with(kw[name], (0,) * kw[name].dim(), value)
    _raises(ValueError, name, gsrender.rasterize, **kw)


def test_rasterize_non_finite_sh_coefficients():
    kw = _scene(sh_degree=3)
    kw["colors"] = _with(kw["colors"], (1, 15, 2), float("nan"))
    _raises(ValueError, "colors", gsrender.rasterize, **kw)


# ---------------------------------------------------------------------- rasterize(): ranges


@pytest.mark.parametrize("value", [0.0, -1.0, -1e-30])
def test_rasterize_non_positive_scales(value):
    _raises(ValueError, "scales", _render, scales=_with(_scene()["scales"], (2, 1), value))


def test_rasterize_zero_quaternion():
    _raises(ValueError, "quats", _render, quats=_with(_scene()["quats"], 3, 0.0))


@pytest.mark.parametrize("value", [-0.1, -1e-6, 1.0001, 2.0])
def test_rasterize_opacity_outside_unit_interval(value):
    _raises(ValueError, "opacities", _render, opacities=_with(_scene()["opacities"], 1, value))


def test_rasterize_opacity_bounds_are_valid():
    out = _render(opacities=torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5]))
    assert torch.isfinite(out.colors).all()


@pytest.mark.parametrize("index", [(0, 0, 0), (1, 1, 1), (0, 1, 1)])
@pytest.mark.parametrize("value", [0.0, -20.0])
def test_rasterize_non_positive_focal_length(index, value):
    _raises(ValueError, "Ks", _render, Ks=_with(_scene()["Ks"], index, value))


@pytest.mark.parametrize("D", [0, 1025, 4096])
@pytest.mark.parametrize("per_camera", [False, True])
def test_rasterize_feature_count_out_of_range(D, per_camera):
    shape = (2, 5, D) if per_camera else (5, D)
    _raises(ValueError, "features", _render, features=torch.zeros(shape))


@pytest.mark.parametrize("D", [1, 1024])
def test_rasterize_feature_count_limits_are_valid(D):
    out = _render(features=torch.full((5, D), 0.25))
    assert out.features.shape == (2, H, W, D)


@pytest.mark.parametrize("name", ["width", "height"])
@pytest.mark.parametrize("value,exc", [
    (0, ValueError), (-1, ValueError), (16385, ValueError), (100000, ValueError),
    (24.0, TypeError), (1.5, TypeError), ("24", TypeError), (None, TypeError), (True, TypeError),
    (torch.tensor(24), TypeError)])
def test_rasterize_bad_image_size(name, value, exc):
    _raises(exc, name, _render, **{name: value})


@pytest.mark.parametrize("name,value", [
    ("mode", "fast"), ("mode", "SORTED"), ("mode", ""), ("mode", None), ("mode", 0),
    ("precision", "fp64"), ("precision", "FP32"), ("precision", None),
    ("backend", "tpu"), ("backend", "CPU"), ("backend", None),
    ("backend", "cuda")])  # valid name, but the inputs live on the CPU
def test_rasterize_bad_option_strings(name, value):
    _raises(ValueError, name, _render, **{name: value})


@pytest.mark.parametrize("value,exc", [(0, ValueError), (-16, ValueError), (257, ValueError),
                                       (8.0, TypeError), ("16", TypeError), (None, TypeError)])
def test_rasterize_bad_tile_size(value, exc):
    _raises(exc, "tile_size", _render, tile_size=value)


@pytest.mark.parametrize("value", [-1, 4, 10, 1.0, True, "1"])
def test_rasterize_sh_degree_out_of_range(value):
    kw = _scene(sh_degree=3)
    kw["sh_degree"] = value
    _raises(ValueError, "sh_degree", gsrender.rasterize, **kw)


@pytest.mark.parametrize("deg,K", [(1, 3), (2, 4), (3, 9), (3, 15)])
def test_rasterize_too_few_sh_coefficients(deg, K):
    kw = _scene(sh_degree=3)
    kw.update(sh_degree=deg, colors=kw["colors"][:, :K])
    msg = _raises(ValueError, "colors", gsrender.rasterize, **kw)
    assert str((deg + 1) ** 2) in msg


@pytest.mark.parametrize("near,far", [(0.0, 10.0), (-1.0, 10.0), (5.0, 5.0), (5.0, 1.0),
                                      (float("nan"), 10.0), (0.01, float("nan")),
                                      (float("inf"), float("inf")), (-float("inf"), 1.0)])
def test_rasterize_bad_near_far(near, far):
    _raises(ValueError, ["near_plane", "far_plane"], _render, near_plane=near, far_plane=far)


@pytest.mark.parametrize("name", ["near_plane", "far_plane"])
def test_rasterize_non_numeric_near_far_names_argument(name):
    _raises(TypeError, name, _render, **{name: "1"})


@pytest.mark.parametrize("value", [-0.1, -1.0, float("nan")])
def test_rasterize_negative_eps2d(value):
    _raises(ValueError, "eps2d", _render, eps2d=value)


@pytest.mark.parametrize("params", [(0.1,), (0.1, 1.0), (0.1, 1.0, 1e-3, 1.0), (-0.1, 1.0, 1e-3),
                                    (0.1, 0.0, 1e-3), (0.1, 1.0, 0.0), (float("nan"), 1.0, 1e-3)])
def test_rasterize_bad_weight_params(params):
    _raises(ValueError, "weight_params", _render, mode="weighted", weight_params=params)


@pytest.mark.parametrize("name,value", [("eps2d", "x"), ("radius_clip", "x"),
                                        ("weight_params", ("x", 1.0, 1.0))])
def test_rasterize_non_numeric_scalars_name_argument(name, value):
    _raises((TypeError, ValueError), name, _render, mode="weighted", **{name: value})


def test_rasterize_non_bool_antialiased():
    _raises(TypeError, "antialiased", _render, antialiased="no")


def test_rasterize_zero_cameras():
    kw = _scene(C=1)
    kw.update(viewmats=kw["viewmats"][:0], Ks=kw["Ks"][:0], backgrounds=None)
    _raises(ValueError, "viewmats", gsrender.rasterize, **kw)


# ------------------------------------------------------------- degenerate but valid scenes


@pytest.mark.parametrize("mode", ["sorted", "weighted"])
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("per_camera", [False, True])
def test_empty_scene_renders_background(mode, dtype, per_camera):
    kw = _scene(dtype=dtype, N=0, D=3)
    if per_camera:
        kw["colors"] = kw["colors"][None].expand(2, 0, 3)
        kw["features"] = kw["features"][None].expand(2, 0, 3)
    bg = kw["backgrounds"]
    out = gsrender.rasterize(**kw, mode=mode)
    assert out.colors.shape == (2, H, W, 3) and out.features.shape == (2, H, W, 3)
    torch.testing.assert_close(out.colors, bg[:, None, None, :].expand(2, H, W, 3))
    assert (out.alphas == 0).all() and (out.depths == 0).all() and (out.features == 0).all()
    assert out.meta["n_intersections"] == 0


def test_empty_scene_sh_and_backward():
    kw = _scene(N=0, sh_degree=2)
    for k in ("means", "quats", "scales", "opacities", "colors", "backgrounds", "viewmats"):
        kw[k] = kw[k].requires_grad_()
    out = gsrender.rasterize(**kw)
    out.colors.sum().backward()
    assert (kw["backgrounds"].grad == H * W).all()  # every pixel shows the background
    assert kw["means"].grad.shape == (0, 3) and kw["colors"].grad.shape == (0, 9, 3)
    assert (kw["viewmats"].grad == 0).all()


def _huge_offscreen_scene(dtype):
    """Gaussians that are enormous, behind the camera, far off-screen, at extreme depth, or all of
    it at once, mixed with ordinary ones."""
    means = torch.tensor([
        [0.0, 0.0, 4.0],        # ordinary
        [0.0, 0.0, 2.0],        # huge (scale 1e3): covers the whole image
        [0.2, 0.1, 3.0],        # absurd (scale 1e8)
        [0.0, 0.0, -4.0],       # behind the camera
        [1e6, 0.0, 4.0],        # far to the right
        [0.0, -1e6, 4.0],       # far above
        [0.0, 0.0, 1e9],        # very far away
        [1e4, 1e4, 0.02],       # just past the near plane, far off-axis
        [5.0, 0.0, 4.0],        # off-screen centre, but huge: reaches into the image
        [0.0, 0.0, 1e-3],       # before the near plane
        [1e30, -1e30, 1e30],    # extreme coordinates (finite in float32)
    ], dtype=dtype)
    N = means.shape[0]
    scales = torch.full((N, 3), 0.2, dtype=dtype)
    scales[1], scales[2], scales[8], scales[10] = 1e3, 1e8, 40.0, 1e30
    scales[7] = torch.tensor([1e4, 1e-6, 1e4], dtype=dtype)
    quats = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=dtype).repeat(N, 1)
    quats[2] = torch.tensor([0.3, -0.5, 0.7, 0.1], dtype=dtype)
    opac = torch.full((N,), 0.6, dtype=dtype)
    colors = torch.rand(N, 3, generator=torch.Generator().manual_seed(1), dtype=dtype)
    kw = _scene(dtype=dtype)
    kw.update(means=means, quats=quats, scales=scales, opacities=opac, colors=colors)
    return kw


@pytest.mark.parametrize("mode", ["sorted", "weighted"])
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("antialiased", [False, True])
def test_huge_and_offscreen_gaussians_render(mode, dtype, antialiased):
    kw = _huge_offscreen_scene(dtype)
    grads = ("means", "quats", "scales", "opacities", "colors", "backgrounds", "viewmats")
    for k in grads:
        kw[k] = kw[k].clone().requires_grad_()
    out = gsrender.rasterize(**kw, mode=mode, antialiased=antialiased, tile_size=TILE)
    for t in (out.colors, out.alphas, out.depths):
        assert torch.isfinite(t).all()
    assert ((out.alphas >= 0) & (out.alphas <= 1)).all()
    radii = out.meta["radii"]
    assert (radii[:, 3] == 0).all() and (radii[:, 9] == 0).all()  # behind / before near plane
    assert (radii[:, 1] > 0).all()  # the huge one is kept (radius capped, not overflowed)
    (out.colors.sum() + out.alphas.sum()).backward()
    for k in grads:
        assert kw[k].grad is not None and kw[k].grad.shape == kw[k].shape, k


def test_huge_gaussian_covers_every_pixel():
    kw = _huge_offscreen_scene(F64)
    keep = [1]
    for k in ("means", "quats", "scales", "opacities", "colors"):
        kw[k] = kw[k][keep]
    out = gsrender.rasterize(**kw)
    # scale 1e3 at depth 2: α = 0.6·exp(−σ) with σ < 1e-5 across the image
    torch.testing.assert_close(out.alphas, torch.full_like(out.alphas, 0.6), atol=1e-5, rtol=0)


# ------------------------------------------------------------ raw ops: bad shapes and dtypes


def _raw_args(dtype=F32) -> dict[str, tuple]:
    """Valid positional arguments of every raw op, from a small real scene."""
    s = _scene(dtype=dtype, N=6)
    pf = (s["means"], s["quats"], s["scales"], s["opacities"], s["viewmats"], s["Ks"], W, H, 0.3,
          0.01, 1e10, 0.0, False)
    radii, m2d, depths, conics, o2d = OPS.project_fwd(*pf)
    C, N = m2d.shape[:2]
    g = torch.Generator().manual_seed(3)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, dtype=dtype)

    dirs, coeffs = rnd(C, N, 3), rnd(N, 16, 3)
    offsets, ids = OPS.bin_tiles(m2d, radii, depths, W, H, TILE, True)
    colors, bg = rnd(C, N, 5), rnd(C, 5)
    rf = (m2d, conics, o2d, colors, depths, bg, offsets, ids, W, H, TILE, 0, [0.05, 1.0, 1e-3],
          "auto")
    render, alphas, last_ids, aux, _, plan = OPS.rasterize_fwd(*rf)
    return {
        "project_fwd": pf,
        "project_bwd": pf[:9] + (False, radii, rnd(C, N, 2), rnd(C, N), rnd(C, N, 3), rnd(C, N)),
        "sh_fwd": (3, dirs, coeffs),
        "sh_bwd": (3, dirs, coeffs, rnd(C, N, 3)),
        "bin_tiles": (m2d, radii, depths, W, H, TILE, True),
        "rasterize_fwd": rf,
        "rasterize_bwd": rf[:13] + (render, alphas, last_ids, aux, rnd(*render.shape),
                                    rnd(*alphas.shape), plan),
    }


# positional index of every tensor argument, its name, and a dimension whose size is fixed by
# the other arguments (so growing it must fail); the first argument of each op sets C/N/dtype.
RAW_TENSORS = {
    "project_fwd": [(0, "means", 1), (1, "quats", 0), (2, "scales", 1), (3, "opacities", 0),
                    (4, "viewmats", 2), (5, "Ks", 0)],
    "project_bwd": [(0, "means", 1), (1, "quats", 1), (2, "scales", 0), (3, "opacities", 0),
                    (4, "viewmats", 1), (5, "Ks", 2), (10, "radii", 2), (11, "v_means2d", 1),
                    (12, "v_depths", 0), (13, "v_conics", 2), (14, "v_opacities2d", 1)],
    "sh_fwd": [(1, "dirs", 2), (2, "coeffs", 0)],
    "sh_bwd": [(1, "dirs", 2), (2, "coeffs", 2), (3, "v_colors", 1)],
    "bin_tiles": [(0, "means2d", 2), (1, "radii", 1), (2, "depths", 0)],
    "rasterize_fwd": [(0, "means2d", 2), (1, "conics", 2), (2, "opacities", 1), (3, "colors", 1),
                      (4, "depths", 0), (5, "backgrounds", 1), (6, "tile_offsets", 2)],
    "rasterize_bwd": [(0, "means2d", 2), (1, "conics", 1), (2, "opacities", 0), (3, "colors", 0),
                      (4, "depths", 1), (5, "backgrounds", 0), (6, "tile_offsets", 1),
                      (13, "render", 2), (14, "alphas", 3), (15, "last_ids", 1), (16, "aux", 2),
                      (17, "v_render", 3), (18, "v_alphas", 1)],
}
INT_TENSORS = {"radii", "tile_offsets", "flatten_ids", "last_ids"}
FIRST = {"project_fwd": "means", "project_bwd": "means", "sh_fwd": "dirs", "sh_bwd": "dirs",
         "bin_tiles": "means2d", "rasterize_fwd": "means2d", "rasterize_bwd": "means2d"}
_CASES = [(op, i, n, d) for op, ts in RAW_TENSORS.items() for i, n, d in ts]
_ALL_TENSOR_CASES = _CASES + [("rasterize_fwd", 7, "flatten_ids", None),
                              ("rasterize_bwd", 7, "flatten_ids", None)]


@pytest.fixture(scope="module")
def raw_f32():
    return _raw_args(F32)


@pytest.fixture(scope="module")
def raw_f64():
    return _raw_args(F64)


def _call(op: str, args: tuple, index: int, value):
    a = list(args)
    a[index] = value
    return getattr(OPS, op)(*a)


def test_raw_args_are_valid(raw_f32, raw_f64):
    for raw in (raw_f32, raw_f64):
        for op, args in raw.items():
            getattr(OPS, op)(*args)


@pytest.mark.parametrize("op,index,name,dim", _CASES)
def test_raw_op_wrong_size_names_argument(raw_f32, op, index, name, dim):
    _raises(ValueError, name, _call, op, raw_f32[op], index, _grow(raw_f32[op][index], dim))


@pytest.mark.parametrize("op,index,name,dim", _ALL_TENSOR_CASES)
@pytest.mark.parametrize("how", ["rank+1", "rank-1"])
def test_raw_op_wrong_rank_names_argument(raw_f32, op, index, name, dim, how):
    t = raw_f32[op][index]
    t = t[None] if how == "rank+1" else (t[0] if t.dim() > 1 else t.reshape(1, -1))
    _raises(ValueError, name, _call, op, raw_f32[op], index, t)


@pytest.mark.parametrize("op,index,name,dim", _ALL_TENSOR_CASES)
@pytest.mark.parametrize("dtype", [torch.int64, torch.float16, torch.bfloat16, torch.bool])
def test_raw_op_wrong_dtype_names_argument(raw_f32, op, index, name, dim, dtype):
    if name in INT_TENSORS and dtype == torch.int64:
        dtype = torch.int16  # int64 indices are as wrong as int16 ones; int32 is required
    _raises(TypeError, name, _call, op, raw_f32[op], index, raw_f32[op][index].to(dtype))


# every tensor but the first (which sets the dtype the others must match)
@pytest.mark.parametrize("op,index,name,dim", [c for c in _ALL_TENSOR_CASES if c[2] != FIRST[c[0]]])
@pytest.mark.parametrize("base", [F32, F64])
def test_raw_op_mixed_dtypes_name_argument(raw_f32, raw_f64, op, index, name, dim, base):
    args = (raw_f32 if base == F32 else raw_f64)[op]
    other = F32 if name in INT_TENSORS else (F64 if base == F32 else F32)
    _raises(TypeError, name, _call, op, args, index, args[index].to(other))


@pytest.mark.parametrize("op,index,name", [
    ("project_fwd", 6, "width"), ("project_fwd", 7, "height"), ("bin_tiles", 3, "width"),
    ("bin_tiles", 4, "height"), ("rasterize_fwd", 8, "width"), ("rasterize_fwd", 9, "height")])
@pytest.mark.parametrize("value", [0, -5])
def test_raw_op_non_positive_image_size(raw_f32, op, index, name, value):
    _raises(ValueError, name, _call, op, raw_f32[op], index, value)


@pytest.mark.parametrize("op,index", [("bin_tiles", 5), ("rasterize_fwd", 10),
                                      ("rasterize_bwd", 10)])
@pytest.mark.parametrize("value", [0, -8, 257])
def test_raw_op_bad_tile_size(raw_f32, op, index, value):
    _raises(ValueError, "tile_size", _call, op, raw_f32[op], index, value)


@pytest.mark.parametrize("op,index,value,name", [
    ("project_fwd", 8, -1.0, "eps2d"), ("project_bwd", 8, -1.0, "eps2d"),
    ("sh_fwd", 0, -1, "degree"), ("sh_fwd", 0, 4, "degree"), ("sh_bwd", 0, 4, "degree"),
    ("rasterize_fwd", 11, 2, "mode"), ("rasterize_fwd", 11, -1, "mode"),
    ("rasterize_fwd", 13, "fp64", "precision"), ("rasterize_fwd", 13, "", "precision"),
    ("rasterize_bwd", 11, 2, "mode")])
def test_raw_op_bad_scalar(raw_f32, op, index, value, name):
    _raises(ValueError, name, _call, op, raw_f32[op], index, value)


def test_raw_sh_too_few_coefficients(raw_f32):
    _, dirs, coeffs = raw_f32["sh_fwd"]
    _raises(ValueError, "coeffs", OPS.sh_fwd, 2, dirs, coeffs[:, :8])
    _raises(ValueError, "coeffs", OPS.sh_bwd, 3, dirs, coeffs[:, :15], raw_f32["sh_bwd"][3])


def test_raw_rasterize_weighted_needs_weight_params(raw_f32):
    a = list(raw_f32["rasterize_fwd"])
    a[11] = 1
    for wp in ([], [0.1, 1.0], [0.1, -1.0, 1e-3]):
        a[12] = wp
        _raises(ValueError, "weight_params", OPS.rasterize_fwd, *a)


@pytest.mark.parametrize("kernels, error", [
    (None, ValueError), ("float", TypeError),  # the old 2-entry plan; a float plan
    ((1, 7), ValueError), ((1, -1), ValueError),
    ((1, 2), ValueError),  # mma_f16: a CUDA kernel
    ((1, 0), ValueError)])  # scalar: the CPU backward is matrix / matrix_det
def test_raw_rasterize_bwd_bad_plan(raw_f32, kernels, error):
    good = raw_f32["rasterize_bwd"][19]  # the forward's plan: its grid and workspaces kept
    if kernels is None:
        plan = good[:2].clone()
    elif kernels == "float":
        plan = good.double()
    else:
        plan = good.clone()
        plan[:2] = torch.tensor(kernels)
    _raises(error, "plan", _call, "rasterize_bwd", raw_f32["rasterize_bwd"], 19, plan)


# -------------------------------------------------- raw rasterize ops: corrupted binning arrays


def _corrupt(raw, what: str):
    """(op args for fwd, for bwd) with tile_offsets / flatten_ids / last_ids corrupted."""
    fwd, bwd = list(raw["rasterize_fwd"]), list(raw["rasterize_bwd"])
    offsets, ids, last = fwd[6].clone(), fwd[7].clone(), bwd[15].clone()
    M, N = ids.numel(), fwd[0].shape[1]
    flat = offsets.view(-1)
    assert M > 4 and (flat[1:] > flat[:-1]).any()
    k = int((flat[1:] > flat[:-1]).nonzero()[0]) + 1  # a tile whose start is above its predecessor's
    if what == "offsets_decreasing":
        flat[k - 1] = flat[k] + 1
    elif what == "offsets_negative":
        flat[0] = -1
    elif what == "offsets_past_end":
        flat[-1] = M + 1
    elif what == "offsets_huge":
        flat[k] = 2**31 - 1
    elif what == "ids_negative":
        ids[0] = -1
    elif what == "ids_past_end":
        ids[-1] = fwd[0].shape[0] * N
    elif what == "ids_huge":
        ids[M // 2] = 2**31 - 1
    elif what == "ids_other_camera":
        ids[0] = (ids[0] + N) % (2 * N)  # a camera-1 id in a camera-0 tile (or vice versa)
    elif what == "ids_too_few":
        ids = ids[: M // 2]  # offsets now point past the end of flatten_ids
    fwd[6], fwd[7] = offsets, ids
    bwd[6], bwd[7], bwd[15] = offsets, ids, last
    return fwd, bwd


CORRUPTIONS = {"offsets_decreasing": "tile_offsets", "offsets_negative": "tile_offsets",
               "offsets_past_end": "tile_offsets", "offsets_huge": "tile_offsets",
               "ids_negative": "flatten_ids", "ids_past_end": "flatten_ids",
               "ids_huge": "flatten_ids", "ids_other_camera": "flatten_ids",
               "ids_too_few": "tile_offsets"}


@pytest.mark.parametrize("what", list(CORRUPTIONS))
@pytest.mark.parametrize("op", ["rasterize_fwd", "rasterize_bwd"])
def test_raw_rasterize_corrupted_binning_raises(raw_f32, what, op):
    fwd, bwd = _corrupt(raw_f32, what)
    _raises(ValueError, CORRUPTIONS[what], getattr(OPS, op), *(fwd if op == "rasterize_fwd" else bwd))


@pytest.mark.parametrize("value", [-1, "M+1", 2**31 - 1])
def test_raw_rasterize_bwd_last_ids_out_of_range(raw_f32, value):
    a = list(raw_f32["rasterize_bwd"])
    last = a[15].clone()
    last[0, 3, 5] = a[7].numel() + 1 if value == "M+1" else value
    a[15] = last
    _raises(ValueError, "last_ids", OPS.rasterize_bwd, *a)


_LAST_IDS_CRASH = """
    import torch
    from gsrender import _C  # noqa: F401
    O = torch.ops.gsrender
    # 1 camera, 32x16 image, two 16x16 tiles: tile 0 lists nothing, tile 1 lists Gaussians 0..3
    m2d = torch.tensor([[[24.0, 8.0]] * 4])
    conics = torch.tensor([0.1, 0.0, 0.1]).expand(1, 4, 3).contiguous()
    opac, colors, depths = torch.full((1, 4), 0.5), torch.rand(1, 4, 4), torch.arange(1.0, 5.0)[None]
    offsets, ids = torch.tensor([[[0, 0]]], dtype=torch.int32), torch.arange(4, dtype=torch.int32)
    args = (m2d, conics, opac, colors, depths, None, offsets, ids, 32, 16, 16, 0, [])
    render, alphas, last, aux, _, plan = O.rasterize_fwd(*args, "auto")
    last = last.clone()
    last[:, :, :16] = 4  # in [0, len(flatten_ids)], but past the end of tile 0's (empty) run
    try:
        O.rasterize_bwd(*args, render, alphas, last, aux, torch.ones_like(render),
                        torch.ones_like(alphas), plan)
        print("RESULT returned")
    except (ValueError, TypeError) as e:
        print("RESULT", type(e).__name__, e)
"""


def test_raw_rasterize_bwd_last_ids_outside_tile_run_raises():
    res = _run_isolated(_LAST_IDS_CRASH)
    assert res.returncode == 0, f"crashed with return code {res.returncode}: {res.stderr[-2000:]}"
    assert "RESULT ValueError" in res.stdout and "last_ids" in res.stdout, res.stdout
