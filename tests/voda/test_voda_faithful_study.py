"""studies/voda/faithful.py --quick: the pipeline's invariants, not its results."""
from __future__ import annotations

import json
import math

import pytest

from gsrender.voda.composite import PLANT
from studies.voda import faithful as S
from studies.voda.trained import voda_config

pytestmark = [pytest.mark.slow,  # trains the study's quick scene
              pytest.mark.skipif(not PLANT.exists(), reason="needs data/plant/plant.splat")]


def test_quick_study_invariants(tmp_path):
    out = tmp_path / "faithful"
    methods = ["oracle", "gg", "gg+voda", "gg+voda[before]", "gg+voda[α-floor]"]
    assert S.main(["--quick", "--out", str(out), "--scenes", str(tmp_path / "scenes"),
                   "--methods", *methods]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["seeds"] == [0] and set(res["seeds"]) <= set(S.TUNING_SEEDS)
    assert set(S.TUNING_SEEDS).isdisjoint(S.EVAL_SEEDS)
    row = res["rows"][0]["methods"]
    assert set(row) == {x for m in methods for x in (m, m + S.AGREE)}
    for m, v in row.items():
        for k in S.METRICS:
            assert math.isfinite(v[k]), (m, k)
    # the oracle removes the true set: every Gaussian of it, nothing else
    assert row["oracle"]["gaussian_iou"] == 1.0 and row["oracle"]["recall_q1"] == 1.0
    assert "missed_q1" in row["gg"] and "missed" not in row["oracle"]
    for m in methods[2:]:
        # renderer-only membership never gives the target past the renderer's stop
        if voda_config(S.QUICK, m).membership == "rendered":
            assert row[m]["added_past_stop"] == 0.0, m
        assert 0 <= row[m]["added_past_stop_only"] <= row[m]["added_past_stop"] <= 1, m
    s = res["summary"]
    assert "gg+voda[before] − gg+voda" in s["delta"] and "gg+voda − gg" in s["delta"]
    assert "gg[agree] − gg" in s["delta"] and "gg − oracle" in s["delta"]
    assert 0 < s["seen_share"][0] <= 1
    assert (out / "results.md").read_text().count("|") > 50
