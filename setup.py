"""Builds gsrender._C: CPU kernels always; CUDA kernels when a GPU is visible (with a CUDA
toolkit and a CUDA build of torch), or when FORCE_CUDA=1 asks for them without a GPU (CI does, to
compile-check them: they take most of the build). GSRENDER_NO_CUDA=1 forces a CPU-only build.

GSRENDER_CPU_ISA_BUILD chooses the CPU kernels' instruction-set copies (csrc/cpu/isa.h): `all`
(the default: AVX-512, AVX2 and baseline, for wheels and CI, which run on any x86-64), `native`
(this machine's best copy and the baseline one) or `host` (this machine's best copy alone: half
the kernels of `native` to compile; the Makefile's default outside CI, for a first build that
runs here)."""
import glob
import logging
import os
import re

from setuptools import find_packages, setup


def _default_cuda_home() -> None:
    # torch locates the toolkit through `which nvcc`; a wrapper script such as /usr/local/bin/nvcc
    # then points it at /usr/local, where libcudart is missing. Prefer the real toolkit folder.
    if os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
        return
    for cand in ("/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)):
        if os.path.exists(os.path.join(cand, "bin", "nvcc")):
            os.environ["CUDA_HOME"] = cand
            return


_default_cuda_home()
# torch warns "No CUDA runtime is found" when it sees a CUDA toolkit but no GPU: the normal state of
# a CPU-only build, and of CI, which compiles the CUDA kernels without a GPU.
logging.getLogger("torch.utils.cpp_extension").addFilter(
    lambda record: "No CUDA runtime is found" not in record.getMessage())

from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension  # noqa: E402

import torch  # noqa: E402

ROOT = os.path.dirname(os.path.abspath(__file__))


def _want_cuda() -> bool:
    if os.environ.get("GSRENDER_NO_CUDA", "0") == "1":
        return False
    if os.environ.get("FORCE_CUDA", "0") == "1":
        if CUDA_HOME is None or torch.version.cuda is None:
            raise SystemExit("FORCE_CUDA=1 needs a CUDA toolkit (nvcc; set CUDA_HOME) and a CUDA "
                             f"build of torch (found toolkit: {CUDA_HOME}, torch CUDA: {torch.version.cuda})")
        return True
    # without a GPU the kernels could not run: skip their (long) compile
    return CUDA_HOME is not None and torch.version.cuda is not None and torch.cuda.is_available()


def _host_isa() -> str:
    """The best of the CPU kernels' copies this machine runs (the flags Linux reports, which it
    clears where the OS does not save the wider registers)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return "unknown"
    if {"avx512f", "avx512vl", "fma"} <= set(flags):
        return "avx512"
    return "avx2" if {"avx2", "fma"} <= set(flags) else "baseline"


def _isa_macros() -> tuple[list, str]:
    """The defines that leave copies out (csrc/cpu/isa.h), and the copies built, for the log."""
    choice = os.environ.get("GSRENDER_CPU_ISA_BUILD", "all")
    if choice not in ("all", "native", "host"):
        raise SystemExit(f"GSRENDER_CPU_ISA_BUILD must be all, native or host, got {choice!r}")
    host = "all" if choice == "all" else _host_isa()
    if host in ("all", "unknown"):  # (unknown: not Linux; every copy, as for `all`)
        return [], "avx512 + avx2 + baseline"
    kept = {host, "baseline"} if choice == "native" else {host}
    left_out = [isa for isa in ("avx512", "avx2", "baseline") if isa not in kept]
    return ([(f"GSR_CPU_ISA_NO_{isa.upper()}", "1") for isa in left_out],
            " + ".join(isa for isa in ("avx512", "avx2", "baseline") if isa in kept))


# The CPU ops' torch glue compiled as one translation unit (torch's headers parsed once, not once
# per glue file): the files it includes are not compiled on their own.
UNITY = os.path.join(ROOT, "csrc", "ops", "cpu", "ops_unity.cpp")


def _unity_members(unity: str) -> set:
    with open(unity) as f:
        names = re.findall(r'^#include "([^"/]+\.cpp)"', f.read(), re.M)
    return {os.path.join(os.path.dirname(unity), n) for n in names}


def _extension():
    rel = lambda paths: sorted(os.path.relpath(p, ROOT) for p in paths)  # noqa: E731
    # csrc/ops: the torch glue (the schema, each op's checks, outputs and dispatch; the CPU ops'
    # files through the unity unit); csrc/cpu: the torch-free CPU kernels
    sources = rel(glob.glob(os.path.join(ROOT, "csrc", "ops", "*.cpp")))
    sources += rel(set(glob.glob(os.path.join(ROOT, "csrc", "ops", "cpu", "*.cpp"))) - _unity_members(UNITY))
    sources += rel(glob.glob(os.path.join(ROOT, "csrc", "cpu", "*.cpp")))
    # csrc/include: torch-free headers both backends share; csrc/ops/include: the glue's (ATen);
    # csrc: the glue reaches the CPU kernels' headers as "cpu/NAME.h"
    include_dirs = [os.path.join(ROOT, "csrc", d) for d in ("include", os.path.join("ops", "include"), "")]
    # -ffp-contract=off: no ISA copy of the CPU kernels fuses a product and a sum on its own, so every
    # copy computes the baseline (SSE2) copy's float bits, and the 8-lane kernels (csrc/cpu/
    # lane_float.h) the scalar code's, by construction (docs/cpu.md, "Per-Gaussian stages")
    # -Wno-psabi: GCC's note that the ABI of 32-byte vector arguments changed in GCC 4.6 concerns
    # calls between objects built by different compilers; every call here is inside this library
    cxx = ["-O3", "-std=c++20", "-ffp-contract=off", "-fopenmp", "-Wall", "-Wno-unknown-pragmas",
           "-Wno-psabi"]
    define_macros, copies = _isa_macros()
    if os.environ.get("GSRENDER_DEBUG", "0") == "1":
        cxx = ["-O0", "-g", "-std=c++20", "-fopenmp", "-Wall", "-Wno-psabi"]
    # the CPU backend's host-only shortcuts in shared headers (gsrender/common.h): on the C++
    # sources only, never nvcc's, so the device and the SIMT build of the kernels (which defines
    # no such macro) compile the same code
    cxx.append("-DGSR_CPU_BACKEND")
    cuda = _want_cuda()
    print(f"gsrender._C: {len(sources)} C++ files{' + the CUDA kernels' if cuda else ''}; CPU kernel "
          f"copies {copies} (GSRENDER_CPU_ISA_BUILD={os.environ.get('GSRENDER_CPU_ISA_BUILD', 'all')}); "
          f"MAX_JOBS={os.environ.get('MAX_JOBS', os.cpu_count())}; ninja numbers each file [n/N] below",
          flush=True)
    if not cuda:
        return CppExtension(
            "gsrender._C", sources, include_dirs=include_dirs, define_macros=define_macros,
            extra_compile_args={"cxx": cxx}, extra_link_args=["-fopenmp"],
        )
    if not torch.cuda.is_available() and "TORCH_CUDA_ARCH_LIST" not in os.environ:
        os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0;9.0"
    # csrc/ops/cuda/*.cu: the torch glue; csrc/cuda/*_kernel.cu: the torch-free kernels + launchers
    sources += rel(glob.glob(os.path.join(ROOT, "csrc", "ops", "cuda", "*.cu")))
    sources += rel(glob.glob(os.path.join(ROOT, "csrc", "cuda", "*_kernel.cu")))
    nvcc = ["-O3", "-std=c++20", "--use_fast_math", "-lineinfo", "--expt-relaxed-constexpr"]
    if os.environ.get("GSRENDER_PTXAS_VERBOSE", "0") == "1":
        nvcc.append("-Xptxas=-v")
    return CUDAExtension(
        "gsrender._C", sources, include_dirs=include_dirs,
        define_macros=define_macros + [("GSRENDER_WITH_CUDA", "1")],
        extra_compile_args={"cxx": cxx, "nvcc": nvcc}, extra_link_args=["-fopenmp"],
    )


setup(
    name="gsrender",
    version="0.1.0",
    packages=find_packages(include=["gsrender", "gsrender.*"]),
    # GSRENDER_NO_EXT=1: metadata and the `gsrender` command only. The Makefile's editable install
    # uses it: pip would compile the extension in a throw-away folder, and build_ext --inplace
    # then compiles it (incrementally, in build/) for the source tree the editable install points at.
    ext_modules=[] if os.environ.get("GSRENDER_NO_EXT", "0") == "1" else [_extension()],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
)
