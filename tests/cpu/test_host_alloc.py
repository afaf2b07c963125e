"""The CPU tensors' block cache (csrc/ops/cpu/host_alloc.cpp): a freed block is kept and serves the
next tensor of its size (a render loop's tensors fault in no fresh page), within its bounds
(cached ≤ 1 GB, live + cached ≤ 2 × peak live), and the bookkeeping holds under threads and
across a fork. The second CPU render (a loop) makes it PyTorch's CPU allocator from 128 KB on.
Observed through an op whose output takes a block (sh_channels_fwd's [C, N, 4 + D], ≥ 2 MB), PyTorch's
own tensors, and _C.host_blocks()."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from gsrender import _C

GB = 1 << 30


def _inputs(N: int, D: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(N, 3, generator=g)
    campos = torch.tensor([[0.0, 0.0, -5.0]])
    coeffs = torch.randn(N, 1, 3, generator=g)
    depths = torch.rand(1, N, generator=g) + 1
    feats = torch.rand(N, D, generator=g)
    return (0, means, campos, coeffs, depths, feats)


def _channels(inputs):
    return torch.ops.gsrender.sh_channels_fwd(*inputs)  # [1, N, 4 + D]


def _check_bounds():
    s = _C.host_blocks()
    assert s["cached"] <= GB and s["live"] + s["cached"] <= 2 * s["peak"], s
    return s


def test_freed_block_serves_the_next_output_of_its_size():
    inputs = _inputs(41_011, 252)  # 42 MB: a size no other test asks for
    a = _channels(inputs)
    assert a.numel() * 4 >= 32 << 20
    ref, ptr = a.clone(), a.data_ptr()
    s0 = _check_bounds()
    del a
    s1 = _check_bounds()
    assert s1["live"] < s0["live"] and s1["cached"] > s0["cached"]
    b = _channels(inputs)
    s2 = _check_bounds()
    assert s2["hits"] == s1["hits"] + 1 and b.data_ptr() == ptr
    assert torch.equal(b, ref)  # the reused block is written over in full


def test_bounds_when_a_larger_output_follows():
    small, large = _inputs(40_013, 252), _inputs(90_007, 252)  # 42 and 90 MB
    for _ in range(2):
        x = _channels(small)
        _check_bounds()
        del x
        _check_bounds()
        y = _channels(large)  # not served by the small block: live + cached must stay ≤ 2 peak
        _check_bounds()
        del y
        _check_bounds()


def test_threads_allocate_and_free_concurrently():
    inputs = _inputs(40_031, 252)
    ref = _channels(inputs)
    live = _C.host_blocks()["live"]
    errors = []

    def worker():
        try:
            for _ in range(4):
                out = _channels(inputs)
                if not torch.equal(out, ref):
                    errors.append("output differs")
                del out
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    s = _check_bounds()
    assert s["live"] == live  # every block the threads took was given back


def test_gradient_blocks_from_one_huge_page_are_reused_and_rewritten():
    """sh_channels_bwd's v_coeffs [N, 16, 3] (3 MB here, between one huge page and glibc's 32 MB
    mmap threshold) comes from the cache: the next call of that size gets a freed block back
    and writes every row of it (degree 1 leaves coefficients 4..15 at zero, the rows' zeroing)."""
    N = 16_411  # 3.15 MB of float32 coefficients, a 4 MB block
    g = torch.Generator().manual_seed(1)
    means, campos = torch.randn(N, 3, generator=g), torch.tensor([[0.0, 0.0, -5.0]])
    coeffs = torch.randn(N, 16, 3, generator=g)

    def v_coeffs(degree, seed):
        v = torch.randn(1, N, 4, generator=torch.Generator().manual_seed(seed))
        return torch.ops.gsrender.sh_channels_bwd(degree, means, campos, coeffs, v)[2]

    ref = v_coeffs(1, 2).clone()
    a = v_coeffs(3, 3)  # coefficients 4..15 nonzero (but where the colour clamp passes nothing)
    assert (a[:, 4:] != 0).sum() > a[:, 4:].numel() // 2
    hits = _C.host_blocks()["hits"]
    del a
    b = v_coeffs(1, 2)  # a cached block: a's, or an older one of its size (it held data too)
    assert _C.host_blocks()["hits"] > hits
    assert torch.equal(b, ref)  # whatever the block held is overwritten
    _check_bounds()


def test_raster_gradients_on_a_reused_block_start_from_zero():
    """rasterize_bwd's per-Gaussian gradients ([C, N, 4 + D] here 3.3 MB) are zeroed blocks from
    the cache: after a backward that filled one, a backward with zero upstream gradients gives
    exactly zero, whatever the reused block held."""
    import gsrender

    N, D, size = 12_011, 64, 96
    g = torch.Generator().manual_seed(5)
    z = 4.0 + torch.rand(N, generator=g)
    means = torch.stack([(torch.rand(N, generator=g) - 0.5) * z, (torch.rand(N, generator=g) - 0.5) * z, z], -1)
    feats = torch.rand(N, D, generator=g).requires_grad_(True)
    out = gsrender.rasterize(
        means, torch.nn.functional.normalize(torch.randn(N, 4, generator=g), dim=-1),
        torch.full((N, 3), 0.02), torch.full((N,), 0.5), torch.rand(N, 3, generator=g),
        torch.eye(4)[None], torch.tensor([[[96.0, 0, 48], [0, 96.0, 48], [0, 0, 1]]]), size, size,
        features=feats)
    (full,) = torch.autograd.grad(out.features.sum(), feats, retain_graph=True)
    assert (full != 0).sum() > N // 2
    hits = _C.host_blocks()["hits"]
    (none,) = torch.autograd.grad((out.features * 0).sum(), feats)
    assert _C.host_blocks()["hits"] > hits  # the first backward's blocks came back
    assert torch.equal(none, torch.zeros_like(none))


def test_pytorch_tensors_from_128_kb_come_from_the_cache():
    """From the second CPU render on PyTorch's own CPU tensors of 128 KB and more take cache
    blocks (a freed one serves the next tensor of its size); smaller ones keep PyTorch's
    allocator."""
    _render_twice()  # a loop: the cache is PyTorch's allocator now
    s0 = _C.host_blocks()
    small = torch.empty(30_000)  # 120 KB
    assert _C.host_blocks()["live"] == s0["live"]
    a = torch.ones(33_001)  # 132,004 bytes: a fresh block of 33 pages, or a cached one of 33 up to
    s1 = _C.host_blocks()   # 33 + 33/8 pages (BlockCache::take), left by earlier tests' scratch
    assert 33 * 4096 <= s1["live"] - s0["live"] <= 33 * 4096 + 33 * 4096 // 8
    del a
    b = torch.zeros(33_001)  # a's block, or an older cached one of its size
    assert _C.host_blocks()["hits"] == s1["hits"] + 1
    assert torch.equal(b, torch.zeros(33_001))
    del small, b
    _check_bounds()


def _render_twice():
    import gsrender

    for _ in range(2):
        gsrender.rasterize(torch.tensor([[0.0, 0.0, 4.0]]), torch.tensor([[1.0, 0, 0, 0]]),
                           torch.full((1, 3), 0.1), torch.tensor([0.5]), torch.rand(1, 3),
                           torch.eye(4)[None],
                           torch.tensor([[[32.0, 0, 16], [0, 32.0, 16], [0, 0, 1]]]), 32, 32)


def _train_step(scene, leaves, feats):
    """A training loop's step: forward, the gradients set to None (zero_grad), backward."""
    import gsrender

    out = gsrender.rasterize(*scene, 256, 256, sh_degree=3, features=feats)
    loss = out.colors.sum() + out.alphas.sum()
    if feats is not None:
        loss = loss + out.features.square().sum()
    for v in (*leaves, feats):
        if v is not None:
            v.grad = None
    loss.backward()


def _fresh_blocks_of_a_training_loop(D: int) -> list[int]:
    """Blocks mapped fresh by each of a training loop's first five steps (cumulative)."""
    N = 20_011
    g = torch.Generator().manual_seed(7)
    z = 4.0 + torch.rand(N, generator=g)
    x, y = ((torch.rand(N, generator=g) - 0.5) * z for _ in range(2))
    means = torch.stack([x, y, z], -1)
    leaves = [means, torch.nn.functional.normalize(torch.randn(N, 4, generator=g), dim=-1),
              torch.exp(-4.0 + 0.5 * torch.randn(N, 3, generator=g)), torch.rand(N, generator=g),
              0.3 * torch.randn(N, 16, 3, generator=g)]
    leaves = [x.requires_grad_(True) for x in leaves]
    K = torch.tensor([[[256.0, 0, 128], [0, 256.0, 128], [0, 0, 1]]])
    scene = (*leaves, torch.eye(4)[None], K)
    feats = torch.rand(N, D, generator=g).requires_grad_(True) if D else None
    fresh = []
    for _ in range(5):
        _train_step(scene, leaves, feats)
        fresh.append(_C.host_blocks()["fresh"])
    _check_bounds()
    return fresh


@pytest.mark.parametrize("D", [0, 32])
def test_a_training_loop_maps_no_fresh_block_after_its_first_steps(D):
    """Every block a steady training step takes (the ops' outputs and scratch, PyTorch's gradient
    copies and sums) is one the step before freed: no fresh pages to fault in from the third step
    on. With live + cached ≤ 1.5 × peak this loop mapped 2 blocks fresh every RGB step (its SH
    gradient among them; 5 at 100k, 512²) and 11 every D = 32 step. In a fresh process: the
    cache's bound follows the process's peak, which earlier tests would have raised."""
    import subprocess
    import sys

    code = ("from tests.cpu.test_host_alloc import _fresh_blocks_of_a_training_loop as f\n"
            f"print(*f({D}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[2]))
    fresh = [int(v) for v in out.stdout.split()]
    assert fresh[1] == fresh[-1], fresh


def test_a_forked_child_allocates_from_the_cache():
    """A fork while another thread allocates (a data loader's workers) does not hand the child a
    held lock: the child's large tensors come from the cache as the parent's do."""
    import multiprocessing as mp

    stop = threading.Event()

    def churn():
        while not stop.is_set():
            torch.empty(1 << 20)

    t = threading.Thread(target=churn)
    t.start()
    try:
        ctx = mp.get_context("fork")
        for _ in range(16):
            p = ctx.Process(target=_child_allocates)
            p.start()
            p.join(30)
            assert p.exitcode == 0
    finally:
        stop.set()
        t.join()


def _child_allocates():
    hits = _C.host_blocks()["hits"]
    for _ in range(2):
        x = torch.empty(1 << 20)
        x[-1] = 2.0  # (no parallel op: OpenMP's pool does not survive a fork)
        del x
    assert _C.host_blocks()["hits"] > hits


def test_opting_out_keeps_pytorch_allocator():
    """GSRENDER_HOST_CACHE=0: after two renders PyTorch's tensors still keep its allocator (the
    ops' outputs take blocks either way)."""
    import os
    import subprocess
    import sys

    code = ("import gsrender, torch\nfrom gsrender import _C\n"
            "from tests.cpu.test_host_alloc import _render_twice\n"
            "_render_twice()\n"
            "live = _C.host_blocks()['live']\nx = torch.empty(1 << 20)\n"
            "print(live, _C.host_blocks()['live'])\n")
    for value, grows in (("0", False), ("1", True)):
        env = dict(os.environ, GSRENDER_HOST_CACHE=value)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True, cwd=str(Path(__file__).resolve().parents[2]))
        before, after = map(int, out.stdout.split())
        assert (after == before + (4 << 20)) == grows, (value, before, after)
