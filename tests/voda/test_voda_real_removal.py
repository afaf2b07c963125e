"""studies/voda/real_removal.py on a model that is its own ground truth (the quick room's): the
rows, the per-object pairs and the saved selections, not the results."""
from __future__ import annotations

import json
import math

import pytest
import torch

from gsrender.voda.composite import PLANT
from studies import scenes as T
from studies.voda import faithful as F
from studies.voda import real_removal as R
from studies.voda.trained import PROTOCOL

pytestmark = pytest.mark.skipif(not PLANT.exists(), reason="needs data/plant/plant.splat")

METHODS = ("oracle", "gg", "gg+voda", "vote")
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def study():
    gt, n = T.ground_truth("quick", 0)
    (vm, K), (tv, tk) = T.rig("quick")
    sz = T.SIZES["quick"]
    names = [f"object{k}" for k in range(1, n + 1)]
    rs = R.make_scene(gt, names, vm[::2], K[::2], tv, tk, sz.width, sz.height,
                      [f"view{i}" for i in range(tv.shape[0])])
    p = {**PROTOCOL, "iters": 6, "voda": {**PROTOCOL["voda"], **F.FROZEN, "warmup": 2}}
    runs = [R.run_seed(rs, s, p, METHODS) for s in SEEDS]
    rows = [json.loads(json.dumps(row, default=float)) for row, _ in runs]
    return rs, rows, runs[0][1], R.summarise(rows, METHODS, names)


def test_the_oracle_is_the_removal_ground_truth(study):
    rs, rows, _, s = study
    for row in rows:
        for k, v in row["methods"]["oracle"]["objects"].items():
            assert v["nrde"] == 0.0 and v["nrde_change"] == 0.0 and v["rde_change"] == 0.0, k
            assert v["gaussian_iou"] == 1.0
    for m in METHODS:
        for key in R.METRICS:
            assert math.isfinite(s["methods"][m][key][0]), (m, key)


def test_pairs_run_over_objects_and_seeds(study):
    rs, rows, _, s = study
    n = rs.ts.n_objects
    d = s["delta_objects"]["gg+voda − gg"]
    assert d["n"] == n * len(SEEDS)
    manual = [rows[i]["methods"]["gg+voda"]["objects"][str(k)]["nrde"]
              - rows[i]["methods"]["gg"]["objects"][str(k)]["nrde"]
              for i in range(len(SEEDS)) for k in range(1, n + 1)]
    assert d["nrde"][0] == pytest.approx(sum(manual) / len(manual))
    assert set(s["objects"]) == set(rs.names)
    # each seed's mean over objects is what faithful.summarise averages
    row = rows[0]["methods"]["gg"]
    assert row["nrde"] == pytest.approx(sum(v["nrde"] for v in row["objects"].values()) / n)
    # hidden shares and Gaussian counts of the objects, per seed
    for k, v in rows[0]["scene"]["trained"].items():
        assert v["gaussians"] == int((rs.ts.model.object_ids == int(k.split("_")[1])).sum())
        assert 0 <= v["hidden_share"] <= 1
    text = R.markdown({"rows": rows, "summary": s, "objects": rs.names, "gaussians":
                       rs.ts.model.num_gaussians, "iteration": 0, "seeds": list(SEEDS),
                       "views": {"train": len(rs.ts.train), "test": len(rs.ts.test),
                                 "width": rs.ts.width, "height": rs.ts.height}})
    assert "gg+voda − gg" in text and all(name in text for name in rs.names)


def test_selections_survive_a_save_and_load(study, tmp_path):
    rs, _, sel, _ = study
    path = tmp_path / "sel.npz"
    R.save_selections(path, sel)
    back = R.load_selections(path)
    assert set(back) == set(sel)
    for m in sel:
        assert len(back[m]) == rs.ts.n_objects
        for a, b in zip(sel[m], back[m]):
            assert torch.equal(a, b), m
    assert R.load_selections(tmp_path / "absent.npz") == {}


def test_the_figure_view_shows_the_smallest_object(study):
    rs, *_ = study
    v = R.figure_view(rs.ts)
    labels = rs.ts.test.labels
    sizes = [int((labels == k).sum()) for k in range(1, rs.ts.n_objects + 1)]
    smallest = 1 + sizes.index(min(sizes))
    per_view = (labels == smallest).flatten(1).sum(1)
    assert per_view[v] == per_view.max() > 0


def test_cutting_a_selection_to_the_true_set(study):
    rs, rows, sel, _ = study
    cut = R.true_part(rs, sel)
    assert set(cut) == set(rs.names)
    for by in cut.values():
        assert set(by) == set(METHODS) - {"oracle"}
        for m, v in by.items():
            assert all(math.isfinite(v[k]) and v[k] >= 0 for k in ("nrde", "rde_raw", "nrde_change")), m
    # a selection already inside the true set is its own cut
    k = 1
    truth = rs.ts.model.object_ids == k
    inside = {"gg": [truth & (torch.arange(truth.numel()) % 2 == 0)] * rs.ts.n_objects}
    again = R.true_part(rs, inside)[rs.names[0]]["gg"]
    from gsrender.voda import metrics as M
    te = rs.ts.test
    direct = M.removal_metrics(rs.ts.model, inside["gg"][0], truth, te.viewmats, te.Ks, rs.ts.width,
                               rs.ts.height, te.labels == k)
    assert again["nrde"] == pytest.approx(direct["nrde"], abs=1e-6)
