"""FPS profiling harness: `gsrender bench` from a checkout (the harness is gsrender.bench.fps).

    python benchmarks/fps.py [--quick | --smoke] [--out DIR] [scene] [sweeps]    # --help: options
"""
from __future__ import annotations

from gsrender.bench.fps import main

if __name__ == "__main__":
    raise SystemExit(main(prog="fps.py"))
