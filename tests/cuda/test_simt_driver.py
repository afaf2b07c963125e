"""The CUDA kernels themselves, run on the CPU by the SIMT runtime (tools/simt, docs/cuda.md).

`tools/kernel_driver/build.sh --simt` compiles the unchanged kernel translation units with the
host compiler against tools/simt's CUDA stand-in (threads of a block as coroutines, warp / block
collectives, the ptx.cuh instructions emulated from the PTX ISA layouts). Here: the runtime's own
self-test (collective semantics, emulated PTX, faults that must abort rather than hang), a
handful of standard cases through the real kernels checked against the CPU backend, and a
deliberately broken MMA that the checker must catch. CI runs the whole case set
(tools/kernel_driver/ci.sh). Skips when no host C++ compiler is present.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gsrender.testing import check, make_cases

pytestmark = [pytest.mark.slow, pytest.mark.build]  # builds the kernel driver on the SIMT runtime (make test-fast leaves it out)

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["csrc/cuda", "csrc/include", "tools/simt", "tools/kernel_driver"]
# one case per kernel family, forward and backward, both Tensor Core precisions' MMA paths; the
# deep scene's lists run three chunks
CASES = ["project_fwd_tiny_aa", "project_bwd_tiny_aa", "project_fwd_tiny_aa_ortho",
         "project_bwd_tiny_aa_ortho", "project_fwd_tiny_aa_fisheye", "project_bwd_tiny_aa_fisheye",
         "sh_bwd_tiny_deg3", "bin_tiles_tiny_t8_sorted",
         "rasterize_fwd_tiny_sorted_D3_f32", "rasterize_fwd_tiny_weighted_D40_f16",
         "rasterize_fwd_deep_weighted_D64_bf16", "rasterize_fwd_tiny_sorted_D130_tf32",
         "rasterize_bwd_tiny_sorted_D3_f32", "rasterize_bwd_tiny_weighted_D40_f16",
         "rasterize_bwd_deep_sorted_D64_bf16", "rasterize_bwd_tiny_sorted_D3_det",
         "weight_stats_tiny_K4", "contributors_tiny_list"]
MMA_CASES = [c for c in CASES if c.endswith(("_f16", "_bf16"))]


def _newest_source() -> float:
    return max(p.stat().st_mtime for d in SOURCES for p in (ROOT / d).rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def simt(tmp_path_factory):
    """The SIMT build folder: build/kernel_driver_simt when newer than every source (CI's
    ci.sh builds it), else a fresh build."""
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        pytest.skip(f"no host C++ compiler ({cxx})")
    cached = ROOT / "build" / "kernel_driver_simt"
    bins = [cached / "kernel_driver", cached / "simt_selftest"]
    if all(b.exists() and b.stat().st_mtime > _newest_source() for b in bins):
        return cached
    out = tmp_path_factory.mktemp("simt")
    r = subprocess.run(["bash", str(ROOT / "tools/kernel_driver/build.sh"), "--simt", str(out)],
                       capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    d = tmp_path_factory.mktemp("cases")
    assert make_cases.main([str(d)]) == 0  # the standard set (seconds); the tests pick from it
    return d


def _run(simt: Path, cases: Path, out: Path, names, env=None) -> None:
    for name in names:
        r = subprocess.run([str(simt / "kernel_driver"), str(cases), str(out), "--only", name],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, **(env or {})}, check=False)
        assert r.returncode == 0, r.stdout + r.stderr


def test_runtime_selftest(simt):
    r = subprocess.run([str(simt / "simt_selftest"), "semantics"], capture_output=True,
                       text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "passed: 0 failures" in r.stdout


def test_half_and_bfloat16_rounding_matches_torch(simt):
    # the stand-ins of __float2half_rn / __float2bfloat16_rn (the Tensor Core operands' rounding)
    g = torch.Generator().manual_seed(2)
    x = torch.cat([
        torch.randn(20000, generator=g) * torch.exp(torch.randn(20000, generator=g) * 6),
        torch.tensor([0.0, -0.0, 1.0, 65504.0, 65519.0, 65520.0, 1e6, -1e6, 2.0 ** -24,
                      2.0 ** -25, 1.5 * 2.0 ** -25, 2.0 ** -14, 3 * 2.0 ** -25, 1 + 2.0 ** -11,
                      1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, math.inf, -math.inf]),
        # exact ties of the half grid
        (torch.arange(1, 2000, dtype=torch.float64) * 2.0 ** -11 + 0.5 * 2.0 ** -11 + 1).float(),
    ])
    r = subprocess.run([str(simt / "simt_selftest"), "round"], input=x.numpy().tobytes(),
                       capture_output=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    bits = np.frombuffer(r.stdout, dtype=np.uint16).reshape(2, -1)
    for row, dt in zip(bits, (torch.float16, torch.bfloat16), strict=True):
        got = torch.from_numpy(row.astype(np.int16)).view(dt).float()
        assert torch.equal(got, x.to(dt).float()), dt


@pytest.mark.parametrize("fault,message", [
    ("lane_exit", "lane 7 exited while lane 0 waits for it at __shfl_down_sync"),
    ("divergent_barrier", "divergent barriers"),
    ("deadlock", "threads 0-15 wait at __syncthreads"),
    ("trap", "__trap()"),
])
def test_faults_abort_with_a_message(simt, fault, message):
    r = subprocess.run([str(simt / "simt_selftest"), "fault", fault], capture_output=True,
                       text=True, timeout=60, check=False)  # a hang would fail here, not block CI
    assert r.returncode == 3, r.stdout + r.stderr
    assert "cudaErrorLaunchFailure" in r.stdout and message in r.stdout, r.stdout


def test_kernels_pass_their_cases(simt, cases, tmp_path, capsys):
    _run(simt, cases, tmp_path, CASES)
    assert check.main([str(tmp_path)]) == 0
    assert f"summary: {len(CASES)} passed, 0 failed" in capsys.readouterr().out


def test_a_broken_mma_fails_the_checker(simt, cases, tmp_path, capsys):
    # swapping A registers a1 and a2 (rows g and g + 8 of columns 2t.. vs 2t + 8..) in the
    # emulated mma.m16n8k16: every f16 / bf16 Tensor Core case must fail, the rest still pass
    _run(simt, cases, tmp_path, CASES, env={"GSR_SIMT_FAULT": "mma_swap_a1_a2"})
    assert check.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    for name in CASES:
        assert (f"FAIL {name}:" in out) == (name in MMA_CASES), (name, out)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
