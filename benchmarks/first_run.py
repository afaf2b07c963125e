"""A new user's first run, measured: a fresh clone of this repository's HEAD in a temporary folder,
then `make demo` there, timed: seconds to the demo's first image (its first PNG), the build's CPU
time and peak compiler memory (each compile through tools/timed_cxx.py), the whole command's CPU
time, and the venv's size. Writes benchmarks/results/first_run.json (README's first-run figure).

    python benchmarks/first_run.py [--out benchmarks/results/first_run.json] [--keep]

The machine's load average is recorded at the start and end: on a busy machine the wall times
count waits for a core, while the CPU times and the memory stay what a quiet machine would take.
Pass make variables through the environment (MAX_JOBS, TORCH_BUILD, GSRENDER_CPU_ISA_BUILD)."""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    """gsrender.sysinfo's, loaded from its file: this script runs before the package is built."""
    spec = importlib.util.spec_from_file_location("gsrender_sysinfo", ROOT / "gsrender" / "sysinfo.py")
    sysinfo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sysinfo)
    return sysinfo.cpu_model()


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def first_png(folder: Path, start: float, found: dict, done: threading.Event) -> None:
    """Polls for the first PNG the demo writes; stores the seconds since start. Looks once more
    after done is set (a PNG written in the last poll interval)."""
    while True:
        if folder.is_dir() and any(folder.rglob("*.png")):
            found["s"] = time.perf_counter() - start
            return
        if done.is_set():
            return
        time.sleep(0.2)


def measure(clone: Path) -> dict:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=clone, capture_output=True, text=True,
                            check=True).stdout.strip()
    log = clone.parent / "compiles.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(CXX=str(clone / "tools" / "timed_cxx.py"), GSR_PROFILE_LOG=str(log),
               GSR_PROFILE_CXX=shutil.which("g++") or "g++", TORCH_NO_COMPILER_WRAPPER="1")
    load_start = os.getloadavg()
    found, done = {}, threading.Event()
    start = time.perf_counter()
    watcher = threading.Thread(target=first_png, args=(clone / "out" / "demo", start, found, done))
    watcher.start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(["make", "demo"], cwd=clone, env=env, check=False)
    total = time.perf_counter() - start
    done.set()
    watcher.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"make demo failed (exit {proc.returncode}) in {clone}")
    units = [json.loads(line) for line in log.read_text().splitlines()]
    if "s" not in found:
        sys.exit(f"make demo wrote no PNG under {clone / 'out' / 'demo'}")
    # the copy of the CPU kernels the demo ran and torch's thread count, from the clone's venv
    probe = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-c",
                            "import torch; from gsrender import _C; print(_C.cpu_isa(), torch.get_num_threads())"],
                           cwd=clone, env=env, capture_output=True, text=True, check=True).stdout.split()
    return {
        "command": "python benchmarks/first_run.py",
        # tools/figures/report.py's machine fields (it cites this file in README's figures)
        "machine": {"cpu": cpu_model(), "isa": probe[0], "cores": os.cpu_count(), "threads": int(probe[1]),
                    "loadavg": [round(x, 2) for x in load_start]},
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "commit": commit,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "demo_first_image_s": round(found["s"], 1),
        "demo_total_s": round(total, 1),
        "command_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
        # the largest of any process the command ran (pip, the compilers, the demo), KiB -> GB
        "command_peak_rss_gb": round(after.ru_maxrss / 2**20, 2),
        # per compile: the compiler's processes (tools/timed_cxx.py), the largest of them
        "build_cpu_s": round(sum(u["cpu_s"] for u in units), 1),
        "build_peak_rss_gb": round(max(u["peak_rss_mb"] for u in units) / 1024, 2),
        "build_units": units,
        "venv_gb": round(dir_bytes(clone / ".venv") / 2**30, 2),
        "settings": {k: os.environ.get(k, "(Makefile default)")
                     for k in ("MAX_JOBS", "TORCH_BUILD", "GSRENDER_CPU_ISA_BUILD")},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "first_run.json"))
    ap.add_argument("--keep", action="store_true", help="keep the clone (its folder is printed)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gsr_first_run_"))
    try:
        result = measure(work / "gsrender")
    finally:
        if args.keep:
            print(f"clone kept in {work / 'gsrender'}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "build_units"}, indent=1))


if __name__ == "__main__":
    main()
