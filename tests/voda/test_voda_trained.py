"""The trained-model scenes (studies/scenes.py) and the VODA benchmark on them
(studies/voda/trained.py --quick): the pipeline's invariants, not its results."""
from __future__ import annotations

import json
import math

import pytest
import torch

from gsrender.loc.stats import weight_stats
from gsrender.voda import metrics as M
from gsrender.voda.baselines import GG_RELEASED, GroupingBaseline, IdentityBaseline, make_baseline
from gsrender.voda.composite import PLANT
from gsrender.voda.train import Streams
from studies import scenes as T
from studies.voda import trained as B

pytestmark = pytest.mark.slow  # trains the study's quick scenes (make test-fast leaves it out)

needs_plant = pytest.mark.skipif(not PLANT.exists(), reason="needs data/plant/plant.splat")


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    return tmp_path_factory.mktemp("trained_scenes")


@pytest.fixture(scope="module")
def quick(scenes):
    return T.load_or_train("quick", 0, "isolated", root=scenes)


@needs_plant
def test_quick_scene_shapes_and_report(quick, scenes):
    sz = T.SIZES["quick"]
    ts = quick
    C, H, W = sz.rings * sz.per_ring, sz.height, sz.width
    assert ts.train.rgb.shape == (C, H, W, 3) and ts.test.rgb.shape == (sz.n_test, H, W, 3)
    assert ts.train.labels.shape == (C, H, W) and ts.train.labels.dtype == torch.int64
    assert set(torch.unique(ts.train.labels).tolist()) == set(range(ts.n_objects + 1))
    assert ts.gt.object_ids.max() == ts.n_objects == sz.n_objects
    noisy = ts.noisy_labels(0)
    assert noisy.shape == ts.train.labels.shape and not torch.equal(noisy, ts.train.labels)
    d, a = ts.removal_depth(1)
    assert d.shape == a.shape == (sz.n_test, H, W) and torch.isfinite(d).all()
    rep = json.loads((scenes / "quick_isolated_0" / "report.json").read_text())
    assert rep == ts.report
    tr = rep["training"]
    assert math.isfinite(tr["psnr_test"]) and tr["psnr_test"] > 12.0  # trained, not noise
    assert tr["steps"] == sz.steps
    cov = rep["coverage"]["all"]
    assert 0.0 <= cov["share_ge3"] <= cov["share_ge2"] <= 1.0
    # Gaussians per derived object add up to the model's
    objs = rep["trained"]
    assert sum(v["gaussians"] for k, v in objs.items() if k != "all") == ts.model.num_gaussians
    with pytest.raises(ValueError, match="object_id"):
        ts.removal_depth(0)


@needs_plant
def test_hidden_share_is_the_one_definition(quick):
    """The report's hidden shares are hidden_mask over the training views' summed weights, the
    same rule metrics.hidden_share applies."""
    ts = quick
    w = weight_stats(ts.model, ts.train.viewmats, ts.train.Ks, ts.width, ts.height).w_sum
    hid = M.hidden_mask(w)
    torch.testing.assert_close(hid, w < M.HIDDEN_REL * w.median())
    for k in range(1, ts.n_objects + 1):
        m = ts.model.object_ids == k
        if m.any():
            got = ts.report["trained"][f"object_{k}"]["hidden_share"]
            assert got == pytest.approx(float(hid[m].float().mean()), abs=1e-6)
            assert got == pytest.approx(M.hidden_share(ts.model, ts.train.viewmats, ts.train.Ks,
                                                       ts.width, ts.height, m), abs=1e-6)


@needs_plant
def test_cache_reloads_the_same_model(quick, scenes):
    again = T.load_or_train("quick", 0, "isolated", root=scenes)
    torch.testing.assert_close(again.model.means, quick.model.means)
    torch.testing.assert_close(again.model.opacities, quick.model.opacities, rtol=1e-5,
                               atol=1e-6)
    assert torch.equal(again.model.object_ids, quick.model.object_ids)
    with pytest.raises(ValueError, match="size must be"):
        T.load_or_train("huge", 0, root=scenes)


def test_streams_give_paired_runs_the_same_views():
    a, b = Streams(3, 7), Streams(3, 7)
    sa = [a.next_view() for _ in range(21)]
    torch.rand(5, generator=b.pixels)  # VODA's pixel draws do not move the view order
    torch.rand(5, generator=b.knn)
    sb = [b.next_view() for _ in range(21)]
    assert sa == sb
    for e in range(3):  # every view once per epoch
        assert sorted(sa[7 * e:7 * e + 7]) == list(range(7))


def test_gaussian_grouping_as_released():
    means = torch.rand(50, 3, generator=torch.Generator().manual_seed(0))
    gg = make_baseline("gg", means, 4, 3)
    assert isinstance(gg, GroupingBaseline)
    assert gg.classifier.out_features == GG_RELEASED["n_classes"] == 256
    assert gg.reg_every == 5 and gg.samples == 1000 and gg.neighbours.shape[1] == 5
    assert gg.ce_scale == pytest.approx(1 / math.log(256))
    two_d = make_baseline("gg-2d", means, 4, 3)
    assert isinstance(two_d, IdentityBaseline) and not isinstance(two_d, GroupingBaseline)
    rendered = torch.randn(6, 16)
    labels = torch.tensor([0, 1, 2, 3, -1, 1])
    plain = IdentityBaseline(50, 256)
    plain.classifier.load_state_dict(two_d.classifier.state_dict())
    torch.testing.assert_close(two_d.render_loss(rendered, labels),
                               plain.render_loss(rendered, labels) / math.log(256))


def test_rde_as_defined_is_uncapped_with_holes_one():
    d_exp = torch.full((1, 2, 2), 2.0)
    d_rem = torch.tensor([[[2.0, 6.0], [3.0, 0.0]]])
    a_rem = torch.tensor([[[1.0, 1.0], [1.0, 0.0]]])  # the last pixel is a hole
    mask = torch.ones(1, 2, 2, dtype=torch.bool)
    assert M.rde(d_rem, a_rem, d_exp, mask, cap=False) == pytest.approx((0 + 2 + 0.5 + 1) / 4)
    assert M.rde(d_rem, a_rem, d_exp, mask) == pytest.approx((0 + 1 + 0.5 + 1) / 4)


@needs_plant
def test_quick_benchmark_invariants(quick, scenes, tmp_path):
    out = tmp_path / "bench"
    assert B.main(["--quick", "--out", str(out), "--scenes", str(scenes), "--no-progress"]) == 0
    res = json.loads((out / "results.json").read_text())
    for f in ("results.md", "curves.png", "delta.png"):
        assert (out / f).stat().st_size > 0
    assert res["size"] == "quick" and res["seeds"] == [0]
    assert set(res["seeds"]).isdisjoint(B.EVAL_SEEDS)
    row = res["rows"][0]["methods"]
    assert set(row) == set(B.QUICK["methods"])
    for m, v in row.items():
        for k in B.METRICS:
            assert math.isfinite(v[k]), (m, k)
        assert 0 <= v["miou"] <= 1 and v["nrde"] >= 0 and v["rde_raw"] >= v["rde"] - 1e-6
    for m in row:  # a baseline and its +VODA run see the same views
        if "+voda" in m:
            assert row[m]["view_order_head"] == row[B.base_name(m)]["view_order_head"]
            assert len(row[m]["losses"]) == B.QUICK["iters"]
    curve = row["gg"]["curve"]
    assert [c[0] for c in curve] == list(range(20, B.QUICK["iters"] + 1, 20))
    s = res["summary"]
    assert s["n"] == 1 and "gg+voda − gg" in s["delta"]
    assert "gg+voda[obj-px] − gg+voda" in s["delta"]
    d = s["delta"]["gg+voda − gg"]["nrde"][0]
    assert d == pytest.approx(row["gg+voda"]["nrde"] - row["gg"]["nrde"], abs=1e-9)
