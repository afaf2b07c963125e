"""3DGS training benchmark: `python benchmarks/train.py --colmap ../shared/data/snowmiku_small
--minutes 15 --plot` (the same code as `gsrender train`; see gsrender/train/run.py)."""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import gsrender from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gsrender.train.run import main

if __name__ == "__main__":
    raise SystemExit(main(prog="benchmarks/train.py"))
