"""Plays the driver without a GPU: ``python -m gsrender.testing.echo CASES_DIR OUT_DIR
[--perturb]`` writes, for every case, a result case whose outputs are the case's expected arrays
(read and written back through gsrender.testing.case). The checker must pass on it; with
--perturb (floats scaled by 1.05, integers + 1) it must fail every case, which shows that the
tolerance logic can fail. CI runs both (tools/kernel_driver/ci.sh), next to the C++ driver's
own --echo mode (the same check for its case reader / writer).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from gsrender.testing.case import Case, list_cases, read_case, write_case

PERTURB_SCALE = 1.05


def perturbed(a: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.floating):
        return a * a.dtype.type(PERTURB_SCALE)
    return a + a.dtype.type(1)


def echo(cases_dir, out_dir, perturb: bool = False) -> int:
    n = 0
    for src in list_cases(cases_dir):
        c = read_case(src, sections=("expected",))
        outputs = {k: perturbed(v) if perturb else v for k, v in c.arrays["expected"].items()}
        res = Case(c.name, c.kernel, c.precision, c.params, {"outputs": outputs},
                   meta={"status": "ok", "source": str(src.resolve()), "driver": "echo"})
        write_case(res, Path(out_dir) / c.name)
        n += 1
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gsrender.testing.echo",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("cases_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--perturb", action="store_true")
    args = ap.parse_args(argv)
    n = echo(args.cases_dir, args.out_dir, args.perturb)
    print(f"echoed {n} cases{' (perturbed)' if args.perturb else ''} to {args.out_dir}")
    return 0 if n else 1


if __name__ == "__main__":
    sys.exit(main())
