"""Helpers shared by the benchmarks: peak memory of a block, the machine's sgemm GFLOP/s, the
environment block (device, versions, commit, threads, load average) and medians / percentiles."""
from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

import gsrender
from gsrender.io.paths import data_dir
from gsrender.sysinfo import cpu_model

ROOT = Path(__file__).resolve().parents[1]
SNOWMIKU_SMALL = data_dir() / "snowmiku_small"  # the training benchmarks' scene


def torchrun() -> str:
    """This interpreter's torchrun (the venv's), else the one on PATH."""
    exe = Path(sys.executable).with_name("torchrun")
    return str(exe) if exe.exists() else "torchrun"

# ---------------------------------------------------------------------------------------------
# memory


def _status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def mem_available_mb() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _release_free_heap() -> None:
    """Give freed heap pages back to the OS (glibc malloc_trim), so the RSS a case starts from
    holds no memory cached from earlier cases and its peak above that start is its own."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class PeakMemory:
    """Peak resident memory of this process during a block, in MB above the RSS at its start.

    Linux: /proc/self/status VmHWM, reset to the current RSS at the start by writing 5 to
    /proc/self/clear_refs (so each case's peak is its own). Elsewhere: psutil's RSS sampled every
    2 ms in a thread when psutil is installed, else resource's ru_maxrss (never reset: an upper
    bound). torch's allocations bypass tracemalloc, hence none of that."""

    def __enter__(self):
        self.method = None
        _release_free_heap()
        if _status_kb("VmHWM") is not None:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
                self.method = "VmHWM"
            except OSError:
                self.method = "VmHWM-noreset"
            self.start = _status_kb("VmRSS") / 1024
            return self
        try:
            import psutil

            proc = psutil.Process()
            self.start = proc.memory_info().rss / 2**20
            self._peak, self._stop = self.start, threading.Event()

            def sample():
                while not self._stop.wait(0.002):
                    self._peak = max(self._peak, proc.memory_info().rss / 2**20)

            self._thread = threading.Thread(target=sample, daemon=True)
            self._thread.start()
            self.method = "psutil"
        except ImportError:
            import resource

            self.start = 0.0
            self.method = "ru_maxrss"
            self._res = resource
        return self

    def __exit__(self, *exc):
        if self.method.startswith("VmHWM"):
            peak = _status_kb("VmHWM") / 1024
        elif self.method == "psutil":
            self._stop.set()
            self._thread.join()
            peak = self._peak
        else:
            peak = self._res.getrusage(self._res.RUSAGE_SELF).ru_maxrss / 1024
        self.peak_mb = peak
        self.delta_mb = max(0.0, peak - self.start)


# ---------------------------------------------------------------------------------------------
# sgemm reference


def _best_time(fn, runs: int, min_time: float = 0.05) -> float:
    """Fastest seconds per call over `runs` repetitions of enough calls to last min_time: the
    machine's capability (the best of several, as other processes may share the cores)."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    reps = max(1, int(min_time / one))
    samples = []
    for _ in range(max(runs, 3)):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - t0) / reps)
    return min(samples)


def sgemm_gflops(chs: list[int], square: int, k: int = 32, tiles: int = 256) -> dict:
    """GFLOP/s of torch.mm on a large square problem, and of the rasterizer's shape: `tiles`
    blocks of [256 pixels, k Gaussians] × [k, CH] (torch.bmm, so all cores share the work as
    the rasterizer's parallel_for over tiles does)."""
    g = torch.Generator().manual_seed(0)
    a = torch.rand(square, square, generator=g)
    b = torch.rand(square, square, generator=g)
    t = _best_time(lambda: torch.mm(a, b), 5)
    out = {"square_n": square, "square": 2 * square**3 / t / 1e9, "tile_k": k, "tile": {}}
    for ch in chs:
        w = torch.rand(tiles, 256, k, generator=g)
        f = torch.rand(tiles, k, ch, generator=g)
        t = _best_time(lambda w=w, f=f: torch.bmm(w, f), 5)
        out["tile"][str(ch)] = 2 * tiles * 256 * k * ch / t / 1e9
    return out


# ---------------------------------------------------------------------------------------------
# the CPU benchmarks' scene


def random_box_scene(n: int, size: int, seed: int = 0, height: int | None = None) -> dict:
    """The CPU targets' scene: N Gaussians uniform in a box 5 ± 0.5 units in front of a size² pinhole camera (f = size·500/512,
    the box fills the view), log-normal scales (median e^-4, σ 0.6), sigmoid-normal opacities.
    height: a size × height camera instead (same f and draws; the box fills its view)."""
    g = torch.Generator().manual_seed(seed)
    f = 500.0 * size / 512
    height = size if height is None else height
    z = 5.0 + (torch.rand(n, generator=g) - 0.5)
    half_x, half_y = 0.5 * size / f * z, 0.5 * height / f * z  # the view's half extents at that depth
    means = torch.stack([(torch.rand(n, generator=g) * 2 - 1) * half_x,
                         (torch.rand(n, generator=g) * 2 - 1) * half_y, z], -1)
    return {"means": means, "quats": torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=-1),
            "scales": torch.exp(-4.0 + 0.6 * torch.randn(n, 3, generator=g)),
            "opacities": torch.sigmoid(torch.randn(n, generator=g)),
            "sh": 0.3 * torch.randn(n, 16, 3, generator=g),
            "viewmat": torch.eye(4)[None], "K": torch.tensor([[[f, 0.0, size / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]]])}


def render_scene(t: dict, feats, vm, K, w, h, mode: str, precision: str, profile: bool):
    """gsrender.rasterize on a scene dict (means, quats, scales, opacities, sh [N, K, 3])."""
    deg = round(t["sh"].shape[1] ** 0.5) - 1
    return gsrender.rasterize(t["means"], t["quats"], t["scales"], t["opacities"], t["sh"], vm, K, w, h,
                              sh_degree=deg, features=feats, mode=mode, precision=precision,
                              profile=profile)


# ---------------------------------------------------------------------------------------------
# environment


def environment(config: str, mode: str) -> dict:
    return {"config": config, "mode": mode, "cpu": cpu_model(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "gsrender": gsrender.__version__, "python": platform.python_version(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S"), "loadavg_start": _loadavg(),
            **{k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "THP_MEM_ALLOC_ENABLE", "GSRENDER_HOST_CACHE")}}


def _loadavg() -> list[float] | None:
    # other processes on the cores skew every timing; record how busy the machine was
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def env_block(device: torch.device | str = "cpu") -> dict:
    """The machine a benchmark ran on: device, torch / CUDA versions, commit, CPU threads, load."""
    device = torch.device(device)
    cuda_name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    base = environment("", "")
    return {"device": device.type if cuda_name is None else f"cuda ({cuda_name})",
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(), "commit": git_commit(),
            "cpu": base["cpu"], "cpu_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
            "loadavg": base["loadavg_start"], "gsrender": gsrender.__version__,
            "python": platform.python_version(), "time": base["time"]}


# ---------------------------------------------------------------------------------------------
# statistics and timing


def median(vals: list[float]) -> float | None:
    return statistics.median(vals) if vals else None


def p90(vals: list[float]) -> float | None:
    """90th percentile, linear interpolation between order statistics (the value itself for one)."""
    if not vals:
        return None
    s = sorted(vals)
    k = 0.9 * (len(s) - 1)
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


# two-sided 95 % Student t quantiles t_{0.975, df}, df = 1..30 (1.96 beyond)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042)


def mean_ci95(vals: list[float]) -> tuple[float, float]:
    """(mean, half-width of its 95 % Student t interval) over independent runs (seeds); the
    half-width is nan for a single value."""
    if not vals:
        raise ValueError("mean_ci95: no values")
    n = len(vals)
    m = statistics.fmean(vals)
    if n == 1:
        return m, float("nan")
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return m, t * statistics.stdev(vals) / n ** 0.5


class Timer:
    """Milliseconds of a block: CUDA events on a GPU (the device's own clock), else the monotonic
    perf_counter."""

    def __init__(self, device: torch.device):
        self.cuda = torch.device(device).type == "cuda"

    def __enter__(self):
        if self.cuda:
            self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.start.record()
        else:
            self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.end.record()
            self.end.synchronize()
            self.ms = self.start.elapsed_time(self.end)
        else:
            self.ms = (time.perf_counter() - self.t0) * 1e3


def peak_memory(device: torch.device):
    """A context whose .delta_mb after the block is its peak memory: the CUDA allocator's peak on a
    GPU, PeakMemory (resident set) on the CPU."""
    return CudaPeak(device) if torch.device(device).type == "cuda" else PeakMemory()


class CudaPeak:
    def __init__(self, device: torch.device):
        self.device = device

    def __enter__(self):
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self.start = torch.cuda.memory_allocated(self.device) / 2**20
        self.method = "cuda_max_allocated"
        return self

    def __exit__(self, *exc):
        torch.cuda.synchronize(self.device)
        self.peak_mb = torch.cuda.max_memory_allocated(self.device) / 2**20
        self.delta_mb = max(0.0, self.peak_mb - self.start)
