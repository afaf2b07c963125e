"""torch.compile(fullgraph=True) on the CPU: of a function calling gsrender.rasterize, and of one
calling the ops (gsrender.ops.*) directly. The compiled function must give eager's output and, by
backward through it, eager's gradients.

Under torch.compile rasterize() skips its value checks (V.values_checked(): no data-dependent
branches in the graph) but still checks shapes, dtypes and devices at trace time.
"""
from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

import gsrender
from gsrender import ops

F32, F64 = torch.float32, torch.float64
W, H = 32, 24
GRAD_ARGS = ("means", "quats", "scales", "opacities", "colors", "viewmats", "features",
             "backgrounds")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    # Inductor's on-disk FX graph cache is keyed by the graph, not by the custom ops' fake impls:
    # a graph compiled against an older build (another output shape) would be replayed with its
    # stale size asserts. Every test compiles afresh.
    torch._dynamo.reset()
    with torch._inductor.config.patch(fx_graph_cache=False):
        yield
    torch._dynamo.reset()


def _scene(dtype=F32, N: int = 40, C: int = 2, sh_degree: int | None = 1, D: int = 2) -> dict:
    g = torch.Generator().manual_seed(0)
    means = 0.8 * torch.randn(N, 3, generator=g, dtype=dtype)
    means[:, 2] += 4.0
    K = torch.tensor([[30.0, 0, W / 2], [0, 28.0, H / 2], [0, 0, 1]], dtype=dtype)
    vm = torch.eye(4, dtype=dtype).repeat(C, 1, 1)
    vm[1:, :3, 3] = torch.tensor([0.4, -0.2, 0.3], dtype=dtype)
    return {
        "means": means,
        "quats": torch.randn(N, 4, generator=g, dtype=dtype),
        "scales": 0.05 + 0.25 * torch.rand(N, 3, generator=g, dtype=dtype),
        "opacities": 0.1 + 0.85 * torch.rand(N, generator=g, dtype=dtype),
        "colors": (torch.rand(N, 3, generator=g, dtype=dtype) if sh_degree is None else
                   0.5 * torch.randn(N, (sh_degree + 1) ** 2, 3, generator=g, dtype=dtype)),
        "viewmats": vm,
        "Ks": K.repeat(C, 1, 1),
        "features": torch.randn(N, D, generator=g, dtype=dtype) if D else None,
        "backgrounds": torch.rand(C, 3, generator=g, dtype=dtype),
    }


def _leaves(scene: dict) -> dict:
    return {k: (v.detach().clone().requires_grad_() if k in GRAD_ARGS and v is not None
                else v) for k, v in scene.items()}


def _check_same(fn, compiled, scene: dict, atol: float = 0.0, rtol: float = 0.0):
    """compiled(**scene) == fn(**scene), and so are the gradients of a random projection of all
    outputs with respect to every differentiable input."""
    a, b = _leaves(scene), _leaves(scene)
    out_e, out_c = fn(**a), compiled(**b)
    assert len(out_e) == len(out_c)
    for e, c in zip(out_e, out_c):
        torch.testing.assert_close(c, e, rtol=rtol, atol=atol)
    g = torch.Generator().manual_seed(7)
    weights = [torch.randn(e.shape, generator=g, dtype=e.dtype) for e in out_e]
    sum((e * w).sum() for e, w in zip(out_e, weights)).backward()
    sum((c * w).sum() for c, w in zip(out_c, weights)).backward()
    for k in GRAD_ARGS:
        if a.get(k) is None:
            continue
        assert b[k].grad is not None, f"no gradient for {k} through the compiled function"
        torch.testing.assert_close(b[k].grad, a[k].grad, rtol=rtol, atol=atol,
                                   msg=lambda m, k=k: f"{k}: {m}")
        assert a[k].grad.abs().sum() > 0, f"{k}: zero gradient, the comparison is vacuous"


# --------------------------------------------------------------------------- rasterize()


def _render_fn(mode: str, sh_degree, **fixed):
    def f(means, quats, scales, opacities, colors, viewmats, Ks, features, backgrounds):
        out = gsrender.rasterize(means, quats, scales, opacities, colors, viewmats, Ks, W, H,
                                 sh_degree=sh_degree, features=features, backgrounds=backgrounds,
                                 mode=mode, **fixed)
        return out.colors, out.alphas, out.depths, out.features

    return f


@pytest.mark.slow  # inductor compiles the whole render: ~20 s
def test_compile_rasterize_fullgraph_matches_eager():
    f = _render_fn("sorted", 1)
    # inductor fuses the glue ops into its own vectorised code: float32 rounding differs from
    # eager's, relative to each value's size (v_viewmats sums over every Gaussian)
    _check_same(f, torch.compile(f, fullgraph=True), _scene(sh_degree=1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("mode", ["sorted", "weighted"])
def test_compile_rasterize_fullgraph_aot(mode):
    """Both modes through AOT autograd (the inductor path is the test above)."""
    f = _render_fn(mode, 1)
    _check_same(f, torch.compile(f, fullgraph=True, backend="aot_eager"), _scene(sh_degree=1))


def test_compile_rasterize_rgb_float64():
    f = _render_fn("sorted", None, precision="fp32", antialiased=True)
    _check_same(f, torch.compile(f, fullgraph=True, backend="aot_eager"),
                _scene(F64, sh_degree=None, D=1))


def test_compile_rasterize_returns_render_output():
    """The whole RenderOutput can leave the compiled function, meta included."""
    scene = _scene(sh_degree=1)

    def f(means, quats, scales, opacities, colors, viewmats, Ks, features, backgrounds):
        return gsrender.rasterize(means, quats, scales, opacities, colors, viewmats, Ks, W, H,
                                  sh_degree=1, features=features, backgrounds=backgrounds)

    out_e = f(**scene)
    out_c = torch.compile(f, fullgraph=True, backend="aot_eager")(**scene)
    assert isinstance(out_c, gsrender.RenderOutput)
    assert out_c.meta["n_intersections"] == out_e.meta["n_intersections"] > 0
    for k in ("colors", "alphas", "depths", "features"):
        torch.testing.assert_close(getattr(out_c, k), getattr(out_e, k), rtol=0, atol=0)
    for k in ("radii", "tile_offsets", "flatten_ids", "stats"):
        torch.testing.assert_close(out_c.meta[k], out_e.meta[k], rtol=0, atol=0)


def test_compile_rasterize_still_checks_shapes():
    """Shape checks run at trace time. Without fullgraph the ValueError reaches the caller; with
    fullgraph=True dynamo wraps any exception raised while tracing in Unsupported ('Observed
    exception', a RuntimeError) whose message carries the original one (torch's behaviour)."""
    scene = _scene(sh_degree=1)
    scene["quats"] = scene["quats"][:, :3]
    f = _render_fn("sorted", 1)
    with pytest.raises(ValueError, match="quats must have shape"):
        torch.compile(f, backend="aot_eager")(**scene)
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported, match="quats must have shape"):
        torch.compile(f, fullgraph=True, backend="aot_eager")(**scene)


# ------------------------------------------------------------------------ the ops directly


def _ops_fn(mode: int, sh_degree: int):
    """The renderer's pipeline written against gsrender.ops (no rasterize(), no validation)."""

    def f(means, quats, scales, opacities, colors, viewmats, Ks, features, backgrounds):
        C, N = viewmats.shape[0], means.shape[0]
        radii, means2d, depths, conics, opac2d = ops.project(
            means, quats, scales, opacities, viewmats, Ks, W, H, 0.3, 0.01, 1e10, 0.0, True)
        campos = -torch.einsum("cji,cj->ci", viewmats[:, :3, :3], viewmats[:, :3, 3])  # [C, 3]
        dirs = (means[None] - campos[:, None]).contiguous()  # [C, N, 3]
        rgb = torch.clamp_min(ops.sh(sh_degree, dirs, colors) + 0.5, 0.0)  # [C, N, 3]
        chans = torch.cat([rgb, depths[..., None], features.expand(C, N, -1)], -1).contiguous()
        bg = torch.cat([backgrounds, backgrounds.new_zeros(C, chans.shape[-1] - 3)], -1)
        offsets, ids = ops.bin_tiles(means2d.detach(), radii, depths.detach(), W, H, 16, mode == 0)
        render, alphas, *_ = ops.rasterize(means2d, conics, opac2d, chans, depths,
                                           bg.contiguous(), offsets, ids, W, H, 16, mode,
                                           [0.05, 1.0, 1e-3], "auto")
        return render, alphas

    return f


@pytest.mark.parametrize("mode,backend", [(ops.SORTED, "inductor"), (ops.WEIGHTED, "aot_eager")],
                         ids=["sorted-inductor", "weighted-aot_eager"])
def test_compile_ops_fullgraph_matches_eager(mode, backend):
    f = _ops_fn(mode, 1)
    # inductor re-associates the small torch ops around the kernels (einsum, +0.5, cat): float32
    # rounding, not a different result
    atol = 1e-5 if backend == "inductor" else 0.0
    _check_same(f, torch.compile(f, fullgraph=True, backend=backend), _scene(sh_degree=1), atol)


def test_compile_ops_dynamic_shapes():
    """One graph for several scene sizes: flatten_ids' length is an unbacked symbol anyway, N
    becomes a symbol too."""
    f = _ops_fn(ops.SORTED, 1)
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(f, fullgraph=True, backend=counter, dynamic=True)
    for N in (40, 23, 9):
        _check_same(f, compiled, _scene(N=N, sh_degree=1))
    assert counter.frame_count == 1, f"recompiled: {counter.frame_count} graphs for 3 sizes"
