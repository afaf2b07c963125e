"""The SIMT race check (tools/simt/racecheck.h) on small kernels with known hazards.

A kernel compiled as build.sh --simt --racecheck compiles the kernel units (g++'s
-fsanitize=thread instrumentation, tools/simt/racecheck.cpp as its runtime): shared-memory
exchanges across warps need a __syncthreads, within a warp a __syncwarp (a shuffle is not
enough), and a write / write pair of the same value is benign. Skips without g++ or addr2line.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.build]  # builds the SIMT runtime's race checker (make test-fast leaves it out)

ROOT = Path(__file__).resolve().parents[2]

KERNEL = r"""
#include <cstdio>
// mode 0: neighbours across warps after a barrier; 1: the same without it; 2: lane pairs after a
// __syncwarp; 3: lane pairs with only a shuffle between; 4: every thread stores the same flag;
// 5: every thread stores its own index into one word
__global__ void exchange(float* out, int* flag, int mode) {
  __shared__ float buf[64];
  const int t = threadIdx.x;
  buf[t] = t;
  if (mode == 0) __syncthreads();
  if (mode == 2) __syncwarp();
  if (mode == 3) (void)__shfl_sync(0xffffffffu, t, 0);
  if (mode >= 4) {
    *flag = mode == 4 ? 1 : t;
    return;
  }
  out[t] = buf[mode >= 2 ? (t ^ 1) : 63 - t];
}
int main() {
  float* o;
  int* f;
  cudaMalloc(&o, 64 * sizeof(float));
  cudaMalloc(&f, sizeof(int));
  for (int mode = 0; mode < 6; ++mode) {
    GSR_SIMT_LAUNCH(1, 64, 0, nullptr, exchange)(o, f, mode);
    const cudaError_t e = cudaGetLastError();
    std::printf("mode %d: %s\n", mode, e == cudaSuccess ? "clean" : cudaGetErrorString(e));
  }
}
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if not shutil.which("g++") or not shutil.which("addr2line"):
        pytest.skip("needs g++ and addr2line")
    d = tmp_path_factory.mktemp("racecheck")
    (d / "k.cu").write_text(KERNEL)
    flags = ["-O2", "-std=c++20", "-DGSR_SIMT", "-DGSR_SIMT_RACECHECK=1", "-g1",
             f"-I{ROOT}/tools/simt", "-include", f"{ROOT}/tools/simt/prelude.h"]
    objs = []
    for src, extra in ((d / "k.cu", ["-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0"]),
                       (ROOT / "tools/simt/simt.cpp", []), (ROOT / "tools/simt/racecheck.cpp", [])):
        obj = d / (src.name + ".o")
        subprocess.run(["g++", *flags, *extra, "-x", "c++", "-c", str(src), "-o", str(obj)],
                       check=True)
        objs.append(str(obj))
    subprocess.run(["g++", "-no-pie", *objs, "-o", str(d / "k")], check=True)
    out = subprocess.run([str(d / "k")], capture_output=True, text=True, check=True).stdout
    return dict(line.split(": ", 1) for line in out.strip().splitlines())


def test_barrier_and_syncwarp_order_the_exchange(report):
    assert report["mode 0"] == "clean"
    assert report["mode 2"] == "clean"


def test_missing_syncthreads_names_both_lines(report):
    r = report["mode 1"]
    assert "racecheck: read / write hazard on shared memory" in r
    assert "(warp 0, lane 31) at" in r and "(warp 1, lane 0) at" in r
    assert "k.cu:17" in r and "k.cu:9" in r  # the read, then the write
    assert "no __syncthreads between them" in r


def test_a_shuffle_is_no_memory_barrier(report):
    r = report["mode 3"]
    assert "write / read hazard" in r and "no __syncwarp between them" in r


def test_same_value_stores_are_benign_different_ones_are_not(report):
    assert report["mode 4"] == "clean"
    assert "write / write hazard on global memory" in report["mode 5"]
