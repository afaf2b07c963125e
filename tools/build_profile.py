#!/usr/bin/env python3
"""Per translation unit cost of building gsrender._C: wall time, CPU time (user + system) and peak
compiler memory, from a clean build in a temporary folder (the tree's own build/ is left alone).
Every compile runs through tools/timed_cxx.py, which records it; ccache is bypassed
(TORCH_NO_COMPILER_WRAPPER=1: torch puts ccache in front of the compiler where it finds it).

  python tools/build_profile.py [--source DIR] [--jobs N] [--json OUT] [--compare BEFORE.json]
  python tools/build_profile.py --log FILE ...   (the records of a build that ran with
      CXX=tools/timed_cxx.py GSR_PROFILE_LOG=FILE, e.g. `make demo`'s, instead of building)

--source builds another checkout (the same setup.py flags apply: GSRENDER_CPU_ISA_BUILD,
GSRENDER_NO_CUDA, ...); --compare prints BEFORE's figures beside this build's. `make build-profile`
runs it on this tree. On a busy machine read the CPU time and the memory: the wall time also
counts waits for a core (the load average is printed with the table)."""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")
    except OSError:
        return "unknown"


def describe(source: str) -> dict:
    """The build's machine, the source's commit and the date: a results file stands on its own."""
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=source, capture_output=True,
                            text=True, check=False).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=source,
                           capture_output=True, text=True, check=False).stdout.strip()
    return {"commit": commit + ("+dirty" if dirty else ""), "cpu_model": cpu_model(), "cores": os.cpu_count(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def profile(source: str, jobs: int) -> dict:
    log_fd, log = tempfile.mkstemp(suffix=".jsonl")
    os.close(log_fd)
    tmp = tempfile.mkdtemp(prefix="gsr_profile_")
    env = dict(os.environ, CXX=os.path.join(ROOT, "tools", "timed_cxx.py"), GSR_PROFILE_LOG=log,
               GSR_PROFILE_CXX=shutil.which("g++") or "g++", MAX_JOBS=str(jobs), TORCH_NO_COMPILER_WRAPPER="1")
    env.setdefault("GSRENDER_NO_CUDA", "1")
    load = os.getloadavg()
    start = time.perf_counter()
    try:
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-temp", os.path.join(tmp, "temp"),
                        "--build-lib", os.path.join(tmp, "lib")], cwd=source, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        with open(log) as f:
            units = [json.loads(line) for line in f]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        os.remove(log)
    for u in units:
        u["unit"] = os.path.relpath(u["unit"], source) if os.path.isabs(u["unit"]) else u["unit"]
    units.sort(key=lambda u: -u["cpu_s"])
    return {"source": source, **describe(source), "jobs": jobs, "isa_build": os.environ.get("GSRENDER_CPU_ISA_BUILD", "(default)"),
            "load_avg_start": [round(x, 2) for x in load], "load_avg_end": [round(x, 2) for x in os.getloadavg()],
            "build_wall_s": round(wall, 1), "units": units}


def from_log(log: str, source: str) -> dict:
    """A profile from timed_cxx.py's records of a build that already ran (its wall time: the span
    from the first compile's start to the last one's end is not recorded, so the sum is given)."""
    with open(log) as f:
        units = [json.loads(line) for line in f]
    for u in units:
        u["unit"] = os.path.relpath(u["unit"], source) if os.path.isabs(u["unit"]) else u["unit"]
    units.sort(key=lambda u: -u["cpu_s"])
    return {"source": source, **describe(source), "jobs": os.environ.get("MAX_JOBS", "?"), "from_log": log,
            "isa_build": os.environ.get("GSRENDER_CPU_ISA_BUILD", "(default)"),
            "load_avg_start": None, "load_avg_end": [round(x, 2) for x in os.getloadavg()],
            "build_wall_s": round(sum(u["wall_s"] for u in units), 1), "units": units}


def print_table(run: dict, before: dict | None) -> None:
    print(f"source {run['source']}, MAX_JOBS={run['jobs']}, GSRENDER_CPU_ISA_BUILD={run['isa_build']}, "
          f"load average {run['load_avg_start']} -> {run['load_avg_end']}")
    old = {u["unit"]: u for u in before["units"]} if before else {}
    head = f"{'translation unit':42} {'wall s':>8} {'CPU s':>8} {'peak MB':>8}"
    print(head + (f"   | before: {'wall s':>7} {'CPU s':>7} {'peak MB':>8}" if before else ""))
    for u in run["units"]:
        line = f"{u['unit']:42} {u['wall_s']:8.1f} {u['cpu_s']:8.1f} {u['peak_rss_mb']:8.0f}"
        if before:
            b = old.get(u["unit"])
            line += f"   |         {b['wall_s']:7.1f} {b['cpu_s']:7.1f} {b['peak_rss_mb']:8.0f}" if b else "   |   (not in it)"
        print(line)
    for u in (before or {"units": []})["units"]:
        if u["unit"] not in {v["unit"] for v in run["units"]}:
            print(f"{u['unit']:42} {'(not in this build)':>26}   |         "
                  f"{u['wall_s']:7.1f} {u['cpu_s']:7.1f} {u['peak_rss_mb']:8.0f}")

    def total(r):
        return (r["build_wall_s"], sum(u["cpu_s"] for u in r["units"]), max(u["peak_rss_mb"] for u in r["units"]))

    w, c, m = total(run)
    line = f"{'whole build (wall, CPU sum, largest peak)':42} {w:8.1f} {c:8.1f} {m:8.0f}"
    if before:
        bw, bc, bm = total(before)
        line += f"   |         {bw:7.1f} {bc:7.1f} {bm:8.0f}"
    print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=ROOT, help="the checkout to build (default: this one)")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("MAX_JOBS", "1")),
                    help="parallel compiles (default MAX_JOBS or 1: one at a time, each TU's wall time its own)")
    ap.add_argument("--log", help="read timed_cxx.py's records of a build that ran instead of building")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--compare", help="a --json file of another build, printed beside this one")
    args = ap.parse_args()
    source = os.path.abspath(args.source)
    run = from_log(args.log, source) if args.log else profile(source, args.jobs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(run, f, indent=1)
    before = None
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
    print_table(run, before)


if __name__ == "__main__":
    main()
