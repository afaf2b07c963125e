"""rasterize_bwd(deterministic=True): bitwise-reproducible gradients (fixed reduction order,
csrc/ops/include/gsrender/det_reduce.h) — across runs, CPU thread counts and channel chunkings — that
still match the default (atomic) backward and the float64 reference."""
from __future__ import annotations

import pytest
import torch

import gsrender
from gsrender import ops
from tests.conftest import every_cpu_isa
from tests.cuda.test_cuda_raster import _cos, _screen_scene, _to
from tests.render.test_gradients import _op_ref, _screen_inputs, _wp
from tests.render.test_opcheck import TILE, WEIGHT_PARAMS, _opcheck, _randn, _raster_inputs
from tests.render.test_opcheck import H as OH
from tests.render.test_opcheck import W as OW

F32, F64 = torch.float32, torch.float64
NAMES = ("means2d", "conics", "opacities", "colors", "depths", "backgrounds")
MODES = ("sorted", "weighted")


def _mode_id(mode: str) -> int:
    return ops.SORTED if mode == "sorted" else ops.WEIGHTED


def _op(t: dict, radii, W, H, mode, deterministic, tile_size=8, precision="auto"):
    offsets, ids = ops.bin_tiles(t["means2d"].detach(), radii, t["depths"].detach(), W, H,
                                 tile_size, mode == "sorted")
    render, alphas, *_ = ops.rasterize(
        t["means2d"], t["conics"], t["opacities"], t["colors"], t["depths"], t["backgrounds"],
        offsets, ids, W, H, tile_size, _mode_id(mode), list(_wp(mode)), precision, deterministic)
    return render, alphas


def _vjp(t: dict, fn) -> list:
    """Gradients of a fixed random projection of fn(inputs) = (render, alphas) w.r.t. every
    input (None for an unused one)."""
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in t.items()}
    render, alphas = fn(leaves)
    g = torch.Generator().manual_seed(0)
    v_r = torch.randn(render.shape, generator=g, dtype=F64).to(render)
    v_a = torch.randn(alphas.shape, generator=g, dtype=F64).to(alphas)
    return list(torch.autograd.grad((render * v_r).sum() + (alphas * v_a).sum(),
                                    list(leaves.values()), allow_unused=True))


def _grads(t: dict, radii, W, H, mode, deterministic, **kw) -> list[torch.Tensor]:
    return _vjp(t, lambda leaves: _op(leaves, radii, W, H, mode, deterministic, **kw))


def _assert_bitwise(a: list, b: list, what: str):
    for k, x, y in zip(NAMES, a, b):
        assert torch.equal(x, y), f"{k}: not bitwise identical ({what})"


def _overlapping(D: int, dtype=F32, seed=3):
    """Many overlapping Gaussians over many 8×8 tiles (each Gaussian in several tiles)."""
    t, radii, W, H = _screen_inputs(seed, C=2, N=300, W=48, H=40, D=D)
    return {k: v.to(dtype) for k, v in t.items()}, radii, W, H


@every_cpu_isa
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("D", [3, 64])
def test_cpu_bitwise_across_runs_and_threads(mode, D):
    t, radii, W, H = _overlapping(D)
    first = _grads(t, radii, W, H, mode, True)
    for _ in range(2):
        _assert_bitwise(first, _grads(t, radii, W, H, mode, True), "repeated run")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _grads(t, radii, W, H, mode, True)
        torch.set_num_threads(2)
        two = _grads(t, radii, W, H, mode, True)
    finally:
        torch.set_num_threads(threads)
    _assert_bitwise(first, one, "1 thread")
    _assert_bitwise(first, two, "2 threads")
    # the same gradients as the default (atomic) backward, up to summation order
    for k, x, y in zip(NAMES, first, _grads(t, radii, W, H, mode, False)):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5, msg=k)


@pytest.mark.parametrize("mode", MODES)
def test_cpu_matches_float64_reference(mode):
    t, radii, W, H = _overlapping(3)
    got = _grads(t, radii, W, H, mode, True)
    t64 = {k: v.double() for k, v in t.items()}
    expected = _vjp(t64, lambda leaves: _op_ref(leaves, radii, W, H, mode))
    for k, gk, ek in zip(NAMES, got, expected):
        if ek is None:  # sorted mode: depths only order the Gaussians
            assert k == "depths" and mode == "sorted" and (gk == 0).all(), k
            continue
        assert _cos(gk, ek) >= 0.9999, k


@pytest.mark.parametrize("mode", MODES)
def test_cpu_channel_chunks_give_the_same_bits(mode, monkeypatch):
    t, radii, W, H = _overlapping(14)  # CH = 17 channels
    whole = _grads(t, radii, W, H, mode, True)
    _, ids = ops.bin_tiles(t["means2d"], radii, t["depths"], W, H, 8, mode == "sorted")
    # a budget of 4 channels per pass: 5 passes, the last one a single channel
    monkeypatch.setenv("GSRENDER_DET_BUDGET_BYTES", str(ids.numel() * 4 * (7 + 4)))
    _assert_bitwise(whole, _grads(t, radii, W, H, mode, True), "channel chunks")
    monkeypatch.setenv("GSRENDER_DET_BUDGET_BYTES", "1")  # one channel per pass
    _assert_bitwise(whole, _grads(t, radii, W, H, mode, True), "one channel per pass")


@pytest.mark.parametrize("mode", MODES)
def test_gradcheck_float64(mode):
    t, radii, W, H = _screen_inputs(4, C=2, N=12, W=10, H=8, D=1)
    inputs = tuple(t[k].clone().requires_grad_(True) for k in NAMES)
    P = torch.randn(8, 2 * H * W * 5, generator=torch.Generator().manual_seed(0), dtype=F64)

    def f(*args):
        render, alphas = _op(dict(zip(NAMES, args)), radii, W, H, mode, True, tile_size=4)
        return P @ torch.cat([render.reshape(-1), alphas.reshape(-1)])

    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("mode", [0, 1], ids=MODES)
def test_opcheck_rasterize_bwd_deterministic(mode):
    ins = _raster_inputs(F32, mode, True)
    common = (*ins, OW, OH, TILE, mode, WEIGHT_PARAMS)
    render, alphas, last_ids, aux, _, plan = torch.ops.gsrender.rasterize_fwd(*common, "auto", True)
    assert ops.plan_info(plan)["backward"] == "matrix_det"
    g = torch.Generator().manual_seed(5)
    v_render, v_alphas = _randn(g, *render.shape, dtype=F32), _randn(g, *alphas.shape, dtype=F32)
    _opcheck(torch.ops.gsrender.rasterize_bwd,
             (*common, render, alphas, last_ids, aux, v_render, v_alphas, plan))


def _scene_args(D=4):
    g = torch.Generator().manual_seed(0)
    N = 40
    means = torch.randn(N, 3, generator=g) * 0.5 + torch.tensor([0.0, 0.0, 4.0])
    quats = torch.randn(N, 4, generator=g)
    scales = 0.05 + 0.2 * torch.rand(N, 3, generator=g)
    opac = 0.3 + 0.6 * torch.rand(N, generator=g)
    colors = torch.rand(N, 3, generator=g)
    feats = torch.rand(N, D, generator=g)
    vm = torch.eye(4)[None]
    Ks = torch.tensor([[[30.0, 0, 16], [0, 30.0, 12], [0, 0, 1]]])
    return [means, quats, scales, opac, colors, vm, Ks], feats, torch.rand(3, generator=g)


def _render_grads(deterministic):
    leaves, feats, bg = _scene_args()
    leaves = [x.requires_grad_(True) for x in leaves]
    out = gsrender.rasterize(*leaves, 32, 24, features=feats, backgrounds=bg,
                             deterministic=deterministic)
    (out.colors.sum() + out.features.square().sum() + out.alphas.sum()).backward()
    return [x.grad for x in leaves]


def test_rasterize_option_and_global_flag():
    a, b = _render_grads(True), _render_grads(True)
    _assert_bitwise(a, b, "rasterize(deterministic=True)")
    for x, y in zip(a, _render_grads(False)):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)
    leaves, _, _ = _scene_args()
    with pytest.raises(TypeError, match="deterministic"):
        gsrender.rasterize(*leaves, 32, 24, deterministic=1)
    with pytest.raises(TypeError, match="deterministic"):
        ops.rasterize(*([None] * 8), 32, 24, 16, 0, [0.0, 1.0, 0.0], "auto", deterministic="yes")
    prev = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        _assert_bitwise(a, _render_grads(None), "deterministic=None under the global flag")
    finally:
        torch.use_deterministic_algorithms(prev)


# ------------------------------------------------------------------------------------ CUDA


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp16", "fp32", "bf16", "tf32"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("D", [4, 64])
def test_cuda_bitwise_and_close_to_cpu(precision, mode, D):
    s = _screen_scene(7 + D, F32, N=300, D=D)
    t = {k: s[k] for k in NAMES}
    W, H, radii = s["width"], s["height"], s["radii"]
    cpu = _grads(t, radii, W, H, mode, True, tile_size=16)
    tg = _to(t, "cuda")
    first = _grads(tg, radii.cuda(), W, H, mode, True, tile_size=16, precision=precision)
    for _ in range(2):
        again = _grads(tg, radii.cuda(), W, H, mode, True, tile_size=16, precision=precision)
        _assert_bitwise(first, again, f"CUDA precision {precision}")
    # the bar of test_cuda_raster.py's gradient checks (the matrix forwards round the channels
    # to f16/bf16/tf32, which weighted mode's backward reads through OUT)
    for k, x, y in zip(NAMES, first, cpu):
        assert _cos(x.cpu(), y) >= 0.999, k


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_projection_and_sh_backwards_bitwise():
    """No float atomics there (one thread per Gaussian, cameras in order): several cameras,
    repeated runs give the same bits and match the CPU."""
    leaves, _, _ = _scene_args()
    means, quats, scales, opac, _, vm, Ks = leaves
    C = 3
    vm, Ks = vm.repeat(C, 1, 1), Ks.repeat(C, 1, 1)
    vm[1:, :3, 3] += torch.tensor([[0.2, -0.1, 0.1], [-0.3, 0.1, 0.0]])
    sh = torch.randn(means.shape[0], 16, 3, generator=torch.Generator().manual_seed(1))

    def grads(device):
        ins = [t.to(device).requires_grad_(True) for t in (means, quats, scales, opac, vm, sh)]
        m, q, s, o, v, c = ins
        out = gsrender.rasterize(m, q, s, o, c, v, Ks.to(device), 32, 24, sh_degree=3,
                                 deterministic=True)
        (out.colors.square().sum() + out.alphas.sum()).backward()
        return [t.grad.cpu() for t in ins]

    first = grads("cuda")
    for _ in range(2):
        for x, y in zip(first, grads("cuda")):
            assert torch.equal(x, y)
    for x, y in zip(first, grads("cpu")):
        torch.testing.assert_close(x, y, rtol=1e-3, atol=1e-4)
