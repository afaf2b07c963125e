"""The CPU backward's default reduction (csrc/cpu/rasterize_bwd_kernel.cpp: backward_chunked): the tiles
split into one chunk per thread with about equal list entries, each Gaussian listed by one chunk
summed straight into the outputs, one listed by several (a chunk boundary crosses it) summed from
per-chunk rows in chunk order. At every thread count (more than the machine's cores too, so the
boundary path runs on any CI machine) the float64 gradients are the reference's, and repeated
float32 runs at one thread count agree bit for bit (gradcheck's reentrancy check needs it)."""
from __future__ import annotations

import pytest
import torch

from tests.conftest import every_cpu_isa
from tests.render.test_deterministic import MODES, NAMES, _assert_bitwise, _grads, _overlapping, _vjp
from tests.render.test_gradients import _op_ref

F32, F64 = torch.float32, torch.float64


@every_cpu_isa
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("D", (3, 61))  # 6 and 64 channels: one vector block; 6 + 2 blocks
def test_every_thread_count_matches_reference(mode, D):
    t, radii, W, H = _overlapping(D, dtype=F64)  # 2 cameras, 8-px tiles, Gaussians in many tiles
    expected = _vjp(t, lambda leaves: _op_ref(leaves, radii, W, H, mode))
    t32 = {k: v.to(F32) for k, v in t.items()}
    threads = torch.get_num_threads()
    try:
        for n in (1, 2, 3, 7):
            torch.set_num_threads(n)
            got = _grads(t, radii, W, H, mode, False)
            for k, gk, ek in zip(NAMES, got, expected):
                if ek is None:  # sorted mode: depths only order the Gaussians
                    assert k == "depths" and mode == "sorted" and (gk == 0).all(), k
                    continue
                rel = float((gk - ek).norm() / ek.norm())
                assert rel <= 1e-10, f"{k}, {n} threads: relative error {rel:.3g}"
            first = _grads(t32, radii, W, H, mode, False)
            _assert_bitwise(first, _grads(t32, radii, W, H, mode, False), f"{n} threads, repeated")
    finally:
        torch.set_num_threads(threads)
