"""The real check's path (benchmarks/loc_real.py) on tiny data: `gsrender train` on snowmiku_small at
half resolution for a few steps with the 4 held-out photos excluded, `gsrender loc build` from the
training photos, `gsrender loc query --intrinsics` (no pose) on the held-out ones, the written
images.txt compared with the COLMAP poses. Skipped without ../shared/data."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

SNOW = Path(__file__).resolve().parents[2] / "shared" / "data" / "snowmiku_small"
pytestmark = pytest.mark.skipif(not (SNOW / "sparse" / "0").is_dir(),
                                reason="shared snowmiku_small data absent")


def test_trained_model_localizes_held_out_photos_from_intrinsics(tmp_path):
    import loc_real

    res = loc_real.run_real(SNOW, steps=STEPS, out=tmp_path, scale=0.5, methods=("splitgs",))
    r = res["splitgs"]
    assert res["held_out"] and len(r["t_err_units"]) == len(res["held_out"])
    assert r["map_points"] > 100
    ok = [i for i, t in enumerate(r["t_err_units"]) if math.isfinite(t)]
    assert ok, "no held-out photo localized"
    # a wrong pose convention or a map in the wrong frame is off by the order of the extent
    best = min(ok, key=lambda i: r["t_err_units"][i])
    assert r["t_err_rel_extent"][best] < 0.05 and r["r_err_deg"][best] < 3.0, r
    assert r["inliers"][best] >= 12
