"""Kernel case files (gsrender.testing): the writer / reader, the checker's tolerance logic, and
that the standard set covers every kernel, precision and channel count the CUDA kernels have
(CPU only; tools/kernel_driver runs the cases on a GPU)."""
import json

import numpy as np
import pytest

from gsrender.testing import check, echo, make_cases, tile_lists
from gsrender.testing.case import Case, list_cases, read_case, write_case


def _case(**arrays):
    return Case("c1", "rasterize_fwd", "f16", {"width": 4, "weight_params": [0.3, 1.5, 0.05]},
                {"inputs": arrays, "expected": {"out": np.arange(6, dtype=np.float32)}},
                {"out": {"kind": "value", "tol": 1e-3}}, {"note": "x"})


def test_roundtrip_keeps_dtype_shape_and_bytes(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {"f32": rng.standard_normal((2, 3, 4)).astype(np.float32),
              "f64": rng.standard_normal(5),
              "i32": rng.integers(-5, 5, (3, 2)).astype(np.int32),
              "i64": np.array([2**40, -1], dtype=np.int64),
              "u8": np.array([1, 255], dtype=np.uint8),
              "empty": np.zeros((0, 3), dtype=np.float32),
              "flag": np.array([True, False]),
              "strided": np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]}
    write_case(_case(**arrays), tmp_path / "c1")
    back = read_case(tmp_path / "c1")
    assert back.kernel == "rasterize_fwd" and back.precision == "f16"
    assert back.params == {"width": 4, "weight_params": [0.3, 1.5, 0.05]}
    assert back.meta == {"note": "x"}
    for k, a in arrays.items():
        b = back.arrays["inputs"][k]
        want = a.astype(np.uint8) if a.dtype == bool else a
        assert b.dtype == want.dtype and b.shape == want.shape, k
        assert np.array_equal(b, want), k
    # raw little-endian bytes, no header inside the .bin files
    raw = (tmp_path / "c1" / "inputs" / "i64.bin").read_bytes()
    assert raw == np.array([2**40, -1], dtype="<i8").tobytes()
    header = json.loads((tmp_path / "c1" / "case.json").read_text())
    assert header["inputs"]["f32"] == {"dtype": "float32", "shape": [2, 3, 4],
                                       "file": "inputs/f32.bin"}
    assert list_cases(tmp_path) == [tmp_path / "c1"]


def test_reader_rejects_bad_cases(tmp_path):
    with pytest.raises(ValueError, match="dtype"):
        write_case(_case(x=np.zeros(2, dtype=np.float16)), tmp_path / "a")
    with pytest.raises(ValueError, match="identifier"):
        write_case(_case(**{"bad name": np.zeros(2)}), tmp_path / "a")
    write_case(_case(x=np.zeros(4, dtype=np.float32)), tmp_path / "b")
    (tmp_path / "b" / "inputs" / "x.bin").write_bytes(b"\0" * 12)  # 3 floats for shape [4]
    with pytest.raises(ValueError, match="holds 3 values"):
        read_case(tmp_path / "b")
    with pytest.raises(FileNotFoundError, match="case.json"):
        read_case(tmp_path / "nothing")


def test_value_rule_is_normalised_and_bounded():
    exp = np.array([[1.0, 100.0], [-2.0, 50.0]], dtype=np.float32)
    rule = {"kind": "value", "tol": 1e-3}
    # global normalisation: an error of 0.05 on a max of 100 is 5e-4
    assert check.compare_array("r", exp + np.float32(0.05), exp, rule).ok
    assert not check.compare_array("r", exp + np.float32(0.2), exp, rule).ok
    # per channel: the same 0.05 on the channel whose max is 2 is 2.5e-2
    pc = dict(rule, per_channel=True)
    assert not check.compare_array("r", exp + np.float32(0.05), exp, pc).ok
    assert check.compare_array("r", exp * np.float32(1 + 5e-4), exp, pc).ok
    # outliers: a fraction may exceed tol, none may exceed tol_max
    e = np.ones(1000, dtype=np.float32)
    o = e.copy()
    o[:2] += np.float32(0.01)
    out = {"kind": "value", "tol": 1e-5, "outliers": 0.002, "tol_max": 0.03}
    assert check.compare_array("a", o, e, out).ok
    o[:3] += np.float32(0.01)  # 3 outliers > 0.2% of 1000
    assert not check.compare_array("a", o, e, out).ok
    o = e.copy()
    o[0] += np.float32(0.05)  # one element past tol_max
    assert not check.compare_array("a", o, e, out).ok
    # shape, dtype and finiteness come first
    assert not check.compare_array("r", exp.ravel(), exp, rule).ok
    assert not check.compare_array("r", exp.astype(np.float64), exp, rule).ok
    bad = exp.copy()
    bad[0, 0] = np.nan
    assert not check.compare_array("r", bad, exp, rule).ok


def test_grad_rule_needs_direction_and_norm():
    rng = np.random.default_rng(1)
    e = rng.standard_normal(500).astype(np.float32)
    rule = {"kind": "grad", "cos": 0.999, "norm": 1e-2}
    assert check.compare_array("g", e + np.float32(1e-3) * rng.standard_normal(500).astype(
        np.float32), e, rule).ok
    assert not check.compare_array("g", e * np.float32(1.05), e, rule).ok  # cosine 1, norm off
    noisy = e + np.float32(0.2) * rng.standard_normal(500).astype(np.float32)
    assert not check.compare_array("g", noisy, e, rule).ok
    z = np.zeros(5, dtype=np.float32)
    assert check.compare_array("g", z, z, rule).ok
    assert not check.compare_array("g", z + np.float32(1e-3), z, rule).ok


def test_grad_rule_sees_a_channel_and_a_group_of_gaussians():
    rng = np.random.default_rng(2)
    e = rng.standard_normal((1, 40, 130)).astype(np.float32)
    e[0, 30:] *= np.float32(1e-3)  # Gaussians deep in their lists: tiny gradients
    part = {"cos": 0.999, "norm": 1e-2}
    rule = {"kind": "grad", "cos": 0.99, "norm": 3e-2, "channels": part, "groups": part}
    groups = np.full(40, 1, dtype=np.int8)
    groups[30:], groups[38:] = 2, 0  # later chunks; two unlisted Gaussians (no gradient)
    e[0, 38:] = 0.0
    assert check.compare_array("v", e.copy(), e, rule, groups).ok
    lost_channels = e.copy()
    lost_channels[..., 128:] = 0.0  # a dropped channel batch: the whole array barely moves
    assert check.compare_array("v", lost_channels, e, {"kind": "grad", "cos": 0.99,
                                                        "norm": 3e-2}).ok
    v = check.compare_array("v", lost_channels, e, rule, groups)
    assert not v.ok and "v[..., 128]" in v.detail
    lost_later = e.copy()
    lost_later[0, 30:] = 0.0  # the Gaussians past the first chunk get nothing
    v = check.compare_array("v", lost_later, e, rule, groups)
    assert not v.ok and "later-chunk" in v.detail
    stray = e.copy()
    stray[0, 39, 0] = np.float32(1e-6)  # a Gaussian in no list must get exactly 0
    v = check.compare_array("v", stray, e, rule, groups)
    assert not v.ok and "unlisted" in v.detail


def test_tile_lists_and_groups():
    offsets = np.array([[[0, 300], [300, 900]]], dtype=np.int32)  # lists of 300, 0, 600, 100
    ids = np.concatenate([np.arange(300), np.arange(600) % 7, np.full(100, 9)]).astype(np.int32)
    stats = tile_lists.list_stats(offsets, ids.size)
    assert (stats.longest, stats.multi_chunk, stats.tiles, stats.chunks()) == (600, 2, 4, 3)
    g = tile_lists.gaussian_groups(offsets, ids, 300)
    assert g[5] == tile_lists.BOTH  # in the first list's first chunk and the third's later ones
    assert g[299] == tile_lists.LATER_CHUNKS  # position 299 of the first list
    assert g[9] == g[200] == tile_lists.FIRST_CHUNK
    assert tile_lists.gaussian_groups(offsets, ids, 302)[301] == tile_lists.UNLISTED


def test_exact_rule_counts_mismatches():
    e = np.arange(1000, dtype=np.int32)
    o = e.copy()
    o[0] = -1
    assert not check.compare_array("i", o, e, {"kind": "exact"}).ok
    assert check.compare_array("i", o, e, {"kind": "exact", "max_mismatch": 0.002}).ok
    o[:3] = -1
    assert not check.compare_array("i", o, e, {"kind": "exact", "max_mismatch": 0.002}).ok


@pytest.fixture(scope="module")
def standard(tmp_path_factory):
    out = tmp_path_factory.mktemp("cases")
    assert make_cases.main([str(out)]) == 0
    return out


def test_standard_set_covers_the_kernels(standard):
    cases = [read_case(p, sections=()) for p in list_cases(standard)]
    by_kernel = {}
    for c in cases:
        by_kernel.setdefault(c.kernel, []).append(c)
    assert set(by_kernel) == {"project_fwd", "project_bwd", "sh_fwd", "sh_bwd", "bin_tiles",
                              "rasterize_fwd", "rasterize_bwd", "weight_stats", "contributors"}
    assert {c.params["degree"] for c in by_kernel["sh_fwd"]} == {0, 1, 2, 3}
    assert {c.params["sort"] for c in by_kernel["bin_tiles"]} == {True, False}
    assert {c.params["exact"] for c in by_kernel["bin_tiles"]} == {True, False}
    fwd = by_kernel["rasterize_fwd"]
    combos = {(c.precision, c.params["mode"]) for c in fwd}
    assert combos >= {(p, m) for p in ("f32", "f16", "bf16", "tf32", "f64") for m in (0, 1)}
    for prec in ("f32", "f16", "bf16", "tf32"):
        D = {int(c.name.split("_D")[1].split("_")[0]) for c in fwd if c.precision == prec}
        assert D == {1, 3, 4, 13, 16, 40, 64, 130, 512}, prec
    bwd = by_kernel["rasterize_bwd"]
    assert {c.precision for c in bwd} == {"f32", "f16", "bf16"}
    # each case names the kernel the CUDA launch plan runs for it (tools/kernel_driver runs it)
    assert {c.params["raster_kernel"] for c in bwd} == {"scalar", "mma_f16", "mma_bf16",
                                                        "scalar_det"}
    assert {(c.precision, c.params["raster_kernel"]) for c in fwd} == {
        ("f32", "scalar"), ("f64", "scalar"), ("f16", "mma_f16"), ("bf16", "mma_bf16"),
        ("tf32", "mma_tf32")}
    assert {c.params["mode"] for c in bwd} == {0, 1}
    bwd_D = {prec: {int(c.name.split("_D")[1].split("_")[0]) for c in bwd if c.precision == prec}
             for prec in ("f32", "f16", "bf16")}
    assert all(D >= {1, 13, 64} for D in bwd_D.values()) and 512 in bwd_D["f32"] & bwd_D["bf16"]
    # real scale: lists past the second chunk, a 256² render of 20k+ Gaussians
    assert check.longest_list(standard)[0] > 2 * tile_lists.CHUNK
    assert any(c.params["width"] == c.params["height"] == 256 and
               read_case(standard / c.name, ("inputs",), {"means2d"}).arrays["inputs"][
                   "means2d"].shape[1] >= 20000 for c in fwd)
    # the Tensor Core bars are the operand precision's; fp32 stays tight
    rules = {c.precision: c.compare["render"]["tol"] for c in fwd}
    assert rules["f32"] <= 1e-5 < rules["tf32"] <= rules["f16"] < rules["bf16"]
    grads = {c.precision: c.compare["v_colors"]["cos"] for c in bwd}
    assert grads["f16"] >= 0.999 and grads["bf16"] >= 0.99 and grads["f32"] > grads["f16"]
    # the inputs are the CPU pipeline's: projected, binned, rendered
    c = read_case(list_cases(standard)[0])
    assert all(np.isfinite(a).all() for a in c.arrays["inputs"].values()
               if a.dtype.kind == "f")


def test_checker_passes_echo_and_fails_every_perturbed_case(standard, tmp_path, capsys):
    assert echo.echo(standard, tmp_path / "same") > 0
    assert check.main([str(tmp_path / "same"), "--expected", str(standard), "--quiet"]) == 0
    n = echo.echo(standard, tmp_path / "perturbed", perturb=True)
    capsys.readouterr()
    assert check.main([str(tmp_path / "perturbed"), "--expected", str(standard)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("FAIL ") for line in lines) == n
    assert lines[-1] == f"summary: 0 passed, {n} failed, 0 skipped of {n}"


def test_checker_reports_driver_status_and_missing_results(standard, tmp_path, capsys):
    name = list_cases(standard)[0].name
    write_case(Case(name, read_case(standard / name, ()).kernel, "f32", {}, {},
                    meta={"status": "skipped: needs sm_80"}), tmp_path / name)
    assert check.main([str(tmp_path), "--expected", str(standard), "--quiet"]) == 1  # the rest
    out = capsys.readouterr().out
    assert "no result" in out and "a skip fails without --allow-skip" in out
    assert check.main([str(tmp_path), "--allow-skip"]) == 0
    assert "1 skipped" in capsys.readouterr().out.splitlines()[-1]
    write_case(Case(name, "x", "f32", {}, {}, meta={"status": "error: illegal address"}),
               tmp_path / name)
    assert check.main([str(tmp_path)]) == 1
    assert "illegal address" in capsys.readouterr().out
