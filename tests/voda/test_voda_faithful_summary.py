"""studies/voda/faithful.py's summary and rows, on hand-made per-scene results (no training)."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from gsrender.voda.loss import VodaConfig
from studies.voda import faithful as S
from studies.voda import trained as T


def _row(split: str, seed: int, nrde: dict) -> dict:
    methods = {}
    for m, x in nrde.items():
        for name in (m, m + S.AGREE):
            methods[name] = {k: x for k in S.METRICS}
    trained = {"object_1": {"hidden_share": 0.01 * (seed + 1), "gaussians": 100},
               "object_2": {"hidden_share": 0.0, "gaussians": 100}}
    return {"scene": {"split": split, "seed": seed, "psnr_test": 30.0, "trained": trained},
            "methods": methods, "seen_share": 0.5}


def test_summary_takes_each_row_over_the_scenes_that_ran_it():
    rows = [_row("isolated", 0, {"oracle": 0.1, "gg": 0.5, "gg+voda": 0.3}),
            _row("occluding", 0, {"oracle": 0.2, "gg": 0.7, "gg+voda": 0.2,
                                  "gg+voda[ray]": 0.1}),
            _row("occluding", 1, {"oracle": 0.2, "gg": 0.6, "gg+voda": 0.4,
                                  "gg+voda[ray]": 0.2})]
    s = S.summarise(rows, ("oracle", "gg", "gg+voda", "gg+voda[ray]"))
    assert s["n"] == 3 and s["scenes"]["gg+voda[ray]"] == 2 and s["scenes"]["gg"] == 3
    assert s["methods"]["gg"]["nrde"][0] == pytest.approx(0.6)
    assert s["methods"]["gg+voda[ray]"]["nrde"][0] == pytest.approx(0.15)
    # paired only where both ran: (0.1 − 0.2, 0.2 − 0.4)
    assert s["delta"]["gg+voda[ray] − gg+voda"]["nrde"][0] == pytest.approx(-0.15)
    assert s["scenes"]["gg+voda[ray] − gg+voda"] == 2
    assert s["delta"]["gg − oracle"]["nrde"][0] == pytest.approx((0.4 + 0.5 + 0.4) / 3)
    assert s["by_split"]["isolated"]["gg"][0] == pytest.approx(0.5)
    assert math.isnan(s["by_split"]["isolated"]["gg"][1])  # one scene: no interval
    assert "gg+voda[ray]" not in s["by_split"]["isolated"]
    # hidden share: per scene the mean over its objects (0.005, 0.005, 0.01)
    assert s["hidden_share_objects"][0] == pytest.approx(0.02 / 3)
    md = S.markdown({"size": "headroom", "splits": ["isolated", "occluding"], "seeds": [0, 1],
                     "rows": rows, "summary": s})
    assert "| gg+voda[ray] (2 scenes) |" in md and "nRDE by split" in md
    # the gate: gg − oracle = (0.4, 0.5, 0.4) beats 0 beyond its interval
    assert "passes" in S.gate(s) and "does not" not in S.gate(s)


def test_gate_needs_an_interval_that_excludes_zero():
    rows = [_row("isolated", 0, {"oracle": 0.1, "gg": 0.5}),
            _row("isolated", 1, {"oracle": 0.3, "gg": 0.2})]
    assert "does not pass" in S.gate(S.summarise(rows, ("oracle", "gg")))
    one = S.summarise(rows[:1], ("oracle", "gg"))
    assert "does not pass" in S.gate(one)  # one scene: no interval, no pass


def test_the_frozen_defaults_and_voda_before_them():
    # frozen on the tuning rows (benchmarks/results/voda_faithful_headroom_freeze.json)
    cfg = VodaConfig()
    assert (cfg.membership, cfg.clustering) == ('walk', 'ray')
    assert (cfg.alpha_floor, cfg.scale_vol, cfg.boundary) == (0.0, False, "labels")
    assert all(getattr(cfg, k) == v for k, v in S.FROZEN.items())
    p = T.PROTOCOL
    now = T.voda_config(p, "gg+voda")
    assert now == VodaConfig(**p["voda"])
    assert T.voda_config(p, "gg+voda[before]") == replace(now, membership="walk", clustering="gap")
    # every one-factor row changes something, else it is gg+voda under another name
    for m in S.VODA_ROWS:
        assert T.voda_config(p, m) != now, m
    assert set(S.EVAL_METHODS) <= set(S.METHODS) <= set(S.KNOWN)
    assert set(S.TUNING_SEEDS).isdisjoint(S.EVAL_SEEDS)


def test_the_readme_line_takes_its_figures_from_the_evaluation_file(tmp_path):
    import json

    from tools.figures import study_figures as F

    ms = ("oracle", "gg", "gg+voda", "gg+voda[before]", "grouping", "grouping+voda", "vote")
    rows = [_row(sp, s, {"oracle": 0.1 + 0.01 * s, "gg": 0.5, "gg+voda": 0.2 - 0.01 * s,
                         "gg+voda[before]": 0.3, "grouping": 0.4, "grouping+voda": 0.25,
                         "vote": 0.45})
            for sp in ("isolated", "occluding") for s in (0, 1, 2)]
    res = {"size": "headroom", "splits": ["isolated", "occluding"], "seeds": [0, 1, 2],
           "rows": rows, "summary": S.summarise(rows, ms)}
    line = F._voda_faithful_line(res)
    d = res["summary"]["delta"]
    assert "3 isolated, 3 occluding scenes" in line and "seeds 0–2" in line
    assert f"gg − oracle {F._pm(d['gg − oracle']['nrde'])}) passes" in line
    assert f"ΔnRDE {F._pm(d['gg+voda − gg']['nrde'])} over Gaussian Grouping" in line
    assert f"against the frozen one {F._pm(d['gg+voda[before] − gg+voda']['nrde'])};" in line
    (tmp_path / "voda_trained.json").write_text(json.dumps({
        "rows": [], "splits": [], "size": "full", "summary": {"delta": {
            "gg+voda − gg": {"nrde": [0.6, 0.6]}, "grouping+voda − grouping": {"nrde": [0.3, 0.4]}},
            "hidden_share_objects": [0.0, 0.0]}}))
    assert line not in F.render_applications(tmp_path)  # no evaluation file: no line
    (tmp_path / "voda_faithful.json").write_text(json.dumps(res))
    apps = F.render_applications(tmp_path)
    assert line in apps and "before the freeze" in apps
