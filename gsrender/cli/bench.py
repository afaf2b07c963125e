"""`gsrender bench [fps options]`: the FPS profiling harness, benchmarks/fps.py."""
from __future__ import annotations

import importlib.util
import sys

from gsrender.io.paths import repo_root


def add_parser(sub) -> None:
    # parsed by benchmarks/fps.py (see gsrender.cli.main.main); listed here for --help
    sub.add_parser("bench", help="FPS profiling harness (benchmarks/fps.py; `gsrender bench --help`)",
                   add_help=False)


def cmd_bench(argv: list[str]) -> int:
    """`gsrender bench [fps options]`: benchmarks/fps.py's main, imported by path from the repo
    root (the benchmarks are not part of the installed package)."""
    path = repo_root() / "benchmarks" / "fps.py"
    if not path.is_file():
        print(f"gsrender: error: bench needs the repository's benchmarks folder ({path} is missing; "
              f"run from a source checkout)", file=sys.stderr)
        return 1
    root = str(repo_root())
    if root not in sys.path:  # fps.py imports benchmarks.common
        sys.path.insert(0, root)
    spec = importlib.util.spec_from_file_location("gsrender_bench_fps", path)
    fps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fps)
    return fps.main(argv, prog="gsrender bench")
