"""The CPU outputs' huge-page blocks (csrc/cpu/host_alloc.cpp): a freed block is kept and serves
the next output of its size (a render loop's outputs fault in no fresh page), within its bounds
(cached ≤ 1 GB, live + cached ≤ peak live), and the bookkeeping holds under threads. Observed
through an op whose output takes a block (sh_channels_fwd's [C, N, 4 + D], ≥ 32 MB) and
_C.host_blocks()."""
from __future__ import annotations

import threading

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
    assert s["cached"] <= GB and s["live"] + s["cached"] <= s["peak"], s
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
        y = _channels(large)  # not served by the small block: live + cached must stay ≤ peak
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
