#!/usr/bin/env python3
"""A compiler wrapper for tools/build_profile.py: runs the real compiler (GSR_PROFILE_CXX, default
g++) with the arguments it was given and appends one JSON line to GSR_PROFILE_LOG: the source
compiled (or "link"), wall seconds, CPU seconds (user + system, the compiler's own processes:
cc1plus, as, ld) and peak resident memory (the largest of those processes). CPU time and peak
memory are what a busy machine inflates least: the wall time also counts the waits for a core."""
import json
import os
import sys
import time


def main() -> int:
    cmd = [os.environ.get("GSR_PROFILE_CXX", "g++"), *sys.argv[1:]]
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    args = sys.argv[1:]
    sources = [a for a in args if a.endswith((".cpp", ".cc", ".cu"))]
    if (not sources and "-shared" not in args) or "-E" in args:
        # a version probe (torch's `c++ -v`) or a preprocessor run (a compiler cache's), not a build step
        return os.waitstatus_to_exitcode(status)
    unit = sources[-1] if sources else "link"
    entry = {"unit": unit, "wall_s": round(wall, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
             "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}  # ru_maxrss: KiB on Linux
    with open(os.environ["GSR_PROFILE_LOG"], "a") as log:
        log.write(json.dumps(entry) + "\n")
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
