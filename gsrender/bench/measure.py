"""What the benchmarks measure with: a block's milliseconds (CUDA events on a GPU, else the
monotonic clock), its peak memory (the CUDA allocator's peak, or the resident set on the CPU), the
machine a run happened on (device, CPU, versions, commit, threads, load average), medians,
percentiles and 95 % intervals, and one render of a scene dict.

Part of the package so that `gsrender bench` (gsrender.bench.fps) runs without a source checkout;
the scripts in benchmarks/ and studies/ import it too."""
from __future__ import annotations

import os
import platform
import statistics
import subprocess
import threading
import time

import torch

import gsrender
from gsrender.io.paths import repo_root
from gsrender.sysinfo import cpu_model

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
# one render


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


def machine() -> dict:
    """CPU model, the instruction-set copy gsrender's kernels run, cores, threads, load average:
    the machine block of every results file the document renderer writes."""
    from gsrender import _C

    return {"cpu": cpu_model(), "isa": _C.cpu_isa(), "cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "loadavg": [round(v, 2) for v in os.getloadavg()]}


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo_root(), capture_output=True, text=True,
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


def fmt_ci(mc: tuple[float, float], digits: int = 3) -> str:
    """A mean_ci95 pair as "m ± c" (just "m" when the interval is nan: a single value)."""
    m, c = mc
    return f"{m:.{digits}f}" if c != c else f"{m:.{digits}f} ± {c:.{digits}f}"


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
