"""The trained-model localization benchmark end to end in its quick mode (studies/loc/trained.py
--quick: one quick trained scene, 6 queries): the pipeline's invariants, not its results — every
method answers every query (at this size most fail), recalls are nested, the ablations differ from SplitGS-Loc in the
component they name (split grows the model, the opacity rule leaves the split's size alone,
selection and consistency filtering only remove points, one-to-one lifting gives one association
per keypoint where the earlier lifting gives more, splitting the thin axis adds children, the
ratio test leaves the map alone), the diagnostics are defined where they should be (siblings
only in split maps), the ladder has its rungs, and JSON, markdown and plot are written."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if not (ROOT / "studies" / "loc" / "trained.py").is_file():
    pytest.skip("studies folder missing", allow_module_level=True)
sys.path.insert(0, str(ROOT))

from studies.loc import trained as lt

pytestmark = pytest.mark.slow  # trains the study's quick scenes (make test-fast leaves it out)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("loc_trained")
    out = tmp / "out"
    assert lt.main(["--quick", "--scenes-root", str(tmp / "scenes"), "--out", str(out)]) == 0
    return out, json.loads((out / "loc_trained.json").read_text())


def test_quick_run_writes_report(quick_run):
    out, d = quick_run
    assert (out / "loc_trained.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "loc_trained.md").read_text()
    for name in lt.METHODS:
        assert f"| {name} |" in md
    assert d["size"] == "quick" and d["seeds"] == [lt.TUNING_SEEDS[0]]
    assert not set(d["tuning_seeds"]) & set(d["eval_seeds"])
    assert d["env"]["commit"]


def test_every_method_localizes_every_query(quick_run):
    _, d = quick_run
    (scene,) = d["scenes"]
    n = lt.SIZES["quick"]["queries"]
    assert scene["queries"] == n and scene["train_views"] > 0
    assert math.isfinite(scene["psnr_test"]) and scene["query_dist_m"] > 0
    for name in lt.METHODS:
        r = scene["methods"][name]
        assert len(r["t_err"]) == len(r["r_err"]) == n
        assert all(e >= 0 for e in r["t_err"] + r["r_err"])
        assert 0 <= r["recall_1cm1deg"] <= r["recall_2cm2deg"] <= r["recall_5cm5deg"] <= 1
        assert r["success"] >= r["recall_5cm5deg"]
        assert r["map_points"] > 0 and r["build_s"] > 0 and r["query_ms"] >= 0


def test_ablations_change_their_own_component(quick_run):
    _, d = quick_run
    m = d["scenes"][0]["methods"]
    assert m["splitgs"]["n_gaussians"] > m["no_split"]["n_gaussians"]  # the split happened
    # the child-opacity rule changes opacities only: the same Gaussians are split
    assert m["density_opacity"]["n_gaussians"] == m["splitgs"]["n_gaussians"]
    # without selection every Gaussian is kept; selection and the filter only remove points
    assert m["no_select"]["n_selected"] == m["no_select"]["n_gaussians"]
    assert m["splitgs"]["n_selected"] < m["splitgs"]["n_gaussians"]
    assert m["no_select"]["map_points"] >= m["splitgs"]["map_points"]
    assert m["no_consistency"]["map_points"] >= m["splitgs"]["map_points"]
    s = d["summary"]
    assert set(s) == set(lt.METHODS)
    assert s["splitgs"]["delta_vs_splitgs"]["recall_2cm2deg"][0] == 0


def test_faithful_mechanisms_change_their_own_component(quick_run):
    _, d = quick_run
    m = d["scenes"][0]["methods"]
    # one keypoint -> one Gaussian; the earlier lifting attaches keypoints to several
    for name in ("splitgs", "no_split", "split_normal", "plain"):
        assert m[name]["assoc_per_keypoint"] == 1.0
    assert m["all_contributors"]["assoc_per_keypoint"] > 1.0
    assert m["legacy"]["assoc_per_keypoint"] > 1.0
    assert m["all_contributors"]["n_gaussians"] == m["splitgs"]["n_gaussians"]
    # splitting the thin axis too can only add children (both within the same growth cap, which
    # the quick scene reaches; tests/loc/test_loc_split.py checks which axes split)
    assert m["split_normal"]["n_gaussians"] >= m["splitgs"]["n_gaussians"]
    # the ratio test is a matcher setting: the same map
    assert m["no_ratio"]["map_points"] == m["splitgs"]["map_points"]
    assert d["match_ratio"]["no_ratio"] is None and d["match_ratio"]["legacy"] is None
    assert all(d["match_ratio"][n] == 0.8 for n in lt.METHODS if n not in lt.NO_RATIO)
    for name in lt.OPACITY_ROWS:
        assert d["configs"][name]["child_opacity"] != d["configs"]["splitgs"]["child_opacity"]


def test_diagnostics_and_ladder(quick_run):
    out, d = quick_run
    m = d["scenes"][0]["methods"]
    # At the quick size (96×72, 500 keypoints) the ratio test leaves most maps without a pose,
    # so the diagnostics are nan there (no inliers); the maps matched without it keep inliers,
    # though whether any of their six queries passes PnP's acceptance varies between machines:
    # the camera's axial displacement (nan without a pose; its sign convention is tested in
    # test_loc_associate) is not asserted here. Only a split map has siblings.
    for name in ("no_split", "plain", "depth_backproj", "triangulated"):
        assert not m[name]["sibling_share"] > 0
    for name in ("no_ratio", "legacy"):
        assert m[name]["sibling_share"] > 0
        assert math.isfinite(m[name]["depth_err_cm"])
    for name in lt.METHODS:
        for k in ("sibling_share", "wrong_sibling_share"):
            assert math.isnan(m[name][k]) or 0 <= m[name][k] <= 1
    for name in lt.PIPELINE_METHODS:
        assert 0 < m[name]["lifted_share"] <= 1 and m[name]["assoc_per_point"] >= 1
    assert [r["method"] for r in d["ladder"]] == list(lt.LADDER[1:])
    assert [r["below"] for r in d["ladder"]] == list(lt.LADDER[:-1])
    md = (out / "loc_trained.md").read_text()
    assert "Ladder from back-projection" in md and "on a split sibling" in md
