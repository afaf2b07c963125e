"""`gsrender bench [fps options]`: the FPS profiling harness, gsrender.bench.fps."""
from __future__ import annotations


def add_parser(sub) -> None:
    # parsed by gsrender.bench.fps (see gsrender.cli.main.main); listed here for --help
    sub.add_parser("bench", help="FPS profiling harness (gsrender.bench.fps; `gsrender bench --help`)",
                   add_help=False)


def cmd_bench(argv: list[str]) -> int:
    """`gsrender bench [fps options]`: gsrender.bench.fps's main."""
    from gsrender.bench import fps

    return fps.main(argv, prog="gsrender bench")
