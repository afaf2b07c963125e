"""Value checks (finite, ranges, tile-list consistency): always on the CPU, on CUDA only under
validation, so that a default CUDA call makes no host sync (csrc/include/gsrender/validation.h)."""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import warnings

import pytest
import torch

import gsrender
from gsrender import _C, contract, ops
from gsrender import reference as ref
from tests.conftest import F32, every_cpu_isa, random_scene


@pytest.fixture
def validation_off():
    gsrender.set_validation(False)
    yield
    gsrender.set_validation(True)


def test_contract_has_one_definition():
    # the Python reference reads the kernels' constants (not a copy that could drift)
    c = _C.contract()
    assert (ref.ALPHA_MIN, ref.ALPHA_MAX, ref.TRANSMITTANCE_MIN) == (
        c["alpha_min"], c["alpha_max"], c["transmittance_min"])
    assert c["alpha_min"] * c["alpha_min_inv"] == 1.0
    # the contract's values (docs/design.md §3), stated once for the whole suite
    assert (c["alpha_min_inv"], c["alpha_max"], c["transmittance_min"]) == (255.0, 0.99, 1e-4)


def test_options_and_limits_come_from_the_kernels():
    # the op's mode and camera_model values index these names, and the channel limit the raster
    # ops check is the one Python states (gsrender.contract reads all three from _C)
    assert contract.MODES == ("sorted", "weighted") and (ops.SORTED, ops.WEIGHTED) == (0, 1)
    assert contract.CAMERA_MODELS == ("pinhole", "ortho", "fisheye")
    assert [ops.camera_model_index(m) for m in contract.CAMERA_MODELS] == [0, 1, 2]
    assert contract.MAX_RASTER_CHANNELS == 4096 >= 4 + contract.MAX_FEATURES
    means, quats, scales, opac, _, vm, Ks = _inputs("cpu")
    radii, m2d, depths, conics, o2d = ops.project(means, quats, scales, opac, vm, Ks, 32, 24, 0.3,
                                                  0.01, 1e10, 0.0, False)
    offs, ids = ops.bin_tiles(m2d, radii, depths, 32, 24, 16, True)
    for channels, ok in ((contract.MAX_RASTER_CHANNELS, True),
                         (contract.MAX_RASTER_CHANNELS + 1, False)):
        chans = depths[..., None].expand(-1, -1, channels).contiguous()
        with contextlib.nullcontext() if ok else pytest.raises(ValueError, match="4096 channels"):
            ops.rasterize(m2d, conics, o2d, chans, depths, None, offs, ids, 32, 24, 16, ops.SORTED,
                          [0.05, 1.0, 1e-3])


def test_set_validation_takes_a_bool():
    with pytest.raises(TypeError, match="on must be a bool"):
        gsrender.set_validation(1)
    assert gsrender.validation() is True  # the suite's setting (conftest.py)


@pytest.mark.parametrize("value, ok", [("0", False), ("1", True), ("yes", None)])
def test_validate_env_variable(value, ok):
    env = {**os.environ, "GSRENDER_VALIDATE": value}
    r = subprocess.run([sys.executable, "-c", "import gsrender; print(gsrender.validation())"],
                       env=env, capture_output=True, text=True)
    if ok is None:
        assert r.returncode != 0 and "GSRENDER_VALIDATE must be 0 or 1" in r.stderr
    else:
        assert r.returncode == 0 and r.stdout.strip() == str(ok)


def _inputs(device):
    s = random_scene(N=40, C=1, width=32, height=24, bg=False).cast(F32)
    return [t.to(device) for t in (s.means, s.quats, s.scales, s.opacities, s.colors, s.viewmats,
                                   s.Ks)]


def test_cpu_checks_values_without_validation(validation_off):
    means, quats, scales, opac, colors, vm, Ks = _inputs("cpu")
    means[3, 1] = float("nan")
    with pytest.raises(ValueError, match="means contains NaN"):
        gsrender.rasterize(means, quats, scales, opac, colors, vm, Ks, 32, 24)
    with pytest.raises(ValueError, match="opacities must lie in"):
        gsrender.rasterize(means.nan_to_num(), quats, scales, opac * 3, colors, vm, Ks, 32, 24)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_default_cuda_raster_path_makes_no_host_sync(validation_off):
    # torch errors on any synchronising CUDA call (.item(), bool(tensor), D2H copies) in this mode.
    # Binning is outside: its intersection count sizes its outputs (one sync, as in gsplat).
    means, quats, scales, opac, colors, vm, Ks = _inputs("cuda")
    for t in (means, opac, colors):
        t.requires_grad_(True)
    with torch.no_grad():
        radii, m2d, depths, conics, o2d = ops.project(means, quats, scales, opac, vm, Ks, 32, 24,
                                                      0.3, 0.01, 1e10, 0.0, False)
        offs, ids = ops.bin_tiles(m2d, radii, depths, 32, 24, 16, True)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        radii, m2d, depths, conics, o2d = ops.project(means, quats, scales, opac, vm, Ks, 32, 24,
                                                      0.3, 0.01, 1e10, 0.0, False)
        chans = torch.cat([colors[None], depths[..., None]], -1).contiguous()
        for precision, det in (("fp32", False), ("auto", False), ("bf16", False), ("tf32", False),
                               ("auto", True)):
            render, *_, plan = ops.rasterize(m2d, conics, o2d, chans, depths, None, offs, ids,
                                             32, 24, 16, ops.SORTED, [0.05, 1.0, 1e-3],
                                             precision, det)
            assert plan.device.type == "cpu"  # the backward reads it without a sync
            render.sum().backward(retain_graph=True)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode", ["sorted", "weighted"])
def test_cuda_rasterize_syncs_once_for_binning(validation_off, mode):
    # the whole public call, forward and backward: exactly one sync, bin_tiles' intersection
    # count (docs/design.md, "Host syncs on the CUDA path")
    means, quats, scales, opac, colors, vm, Ks = _inputs("cuda")
    for t in (means, scales, colors):
        t.requires_grad_(True)
    gsrender.rasterize(means, quats, scales, opac, colors, vm, Ks, 32, 24, mode=mode)  # warm-up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = gsrender.rasterize(means, quats, scales, opac, colors, vm, Ks, 32, 24,
                                     mode=mode, features=colors[:, :2] * 2)
            (out.colors.sum() + out.features.sum() + out.alphas.sum()).backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in seen if "synchroniz" in str(w.message)]
    assert len(syncs) == 1, [str(w.message) for w in syncs]
    assert gsrender.raster_plan(out.meta)["forward"] in ops.KERNELS


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_checks_values_under_validation():
    means, quats, scales, opac, colors, vm, Ks = _inputs("cuda")
    means[3, 1] = float("nan")
    with pytest.raises(ValueError, match="means contains NaN"):
        gsrender.rasterize(means, quats, scales, opac, colors, vm, Ks, 32, 24)


# ---- per-call validation (validate=...): a per-thread override of the global switch


def test_validate_scope_overrides_the_global_switch_and_restores_it(validation_off):
    from gsrender import validate as V
    assert _C.call_validation() == -1 and not gsrender.validation()
    with V.scope(True):
        assert gsrender.validation() and V.values_checked(torch.device("cuda"))
        with V.scope(False):  # nested: the inner call's setting, then the outer one's again
            assert not gsrender.validation()
        with V.scope(None):  # None follows whatever is in force
            assert gsrender.validation()
        assert gsrender.validation()
    assert _C.call_validation() == -1 and not gsrender.validation()
    with pytest.raises(RuntimeError, match="boom"), V.scope(True):
        raise RuntimeError("boom")
    assert _C.call_validation() == -1  # restored on an error too


def test_validate_false_turns_cuda_checks_off_for_one_call():
    from gsrender import validate as V
    assert gsrender.validation()  # the suite's global setting
    with V.scope(False):
        assert not V.values_checked(torch.device("cuda"))
        assert V.values_checked(torch.device("cpu"))  # the CPU always checks
    assert gsrender.validation()


@pytest.mark.parametrize("bad", [1, "yes", 0.0])
def test_validate_takes_a_bool_or_none(bad):
    means, quats, scales, opac, colors, vm, Ks = _inputs("cpu")
    with pytest.raises(TypeError, match="validate must be a bool or None"):
        gsrender.rasterize(means, quats, scales, opac, colors, vm, Ks, 32, 24, validate=bad)


def test_cpu_checks_values_whatever_validate_says(validation_off):
    means, quats, scales, opac, colors, vm, Ks = _inputs("cpu")
    means[3, 1] = float("nan")
    for validate in (None, False, True):
        with pytest.raises(ValueError, match="means contains NaN"):
            gsrender.rasterize(means, quats, scales, opac, colors, vm, Ks, 32, 24,
                               validate=validate)
    assert _C.call_validation() == -1


class _BackwardSpy:
    """torch.ops.gsrender with rasterize_bwd wrapped to record whether values are checked."""

    def __init__(self, seen):
        self.seen = seen

    def __getattr__(self, name):
        op = getattr(torch.ops.gsrender, name)
        if name != "rasterize_bwd":
            return op

        def spy(*args):
            self.seen.append(gsrender.validation())
            return op(*args)
        return spy


@pytest.mark.parametrize("validate, expect", [(None, False), (True, True), (False, False)])
def test_validate_reaches_the_backward(validation_off, monkeypatch, validate, expect):
    # autograd may run the backward on another thread after the call returned: the forward
    # records its setting and the backward re-applies it (what the CUDA kernels' binning check
    # reads; the CPU checks anyway)
    seen = []
    monkeypatch.setattr(ops, "_ops", _BackwardSpy(seen))
    means, quats, scales, opac, colors, vm, Ks = _inputs("cpu")
    colors.requires_grad_(True)
    out = gsrender.rasterize(means, quats, scales, opac, colors, vm, Ks, 32, 24,
                             validate=validate)
    assert _C.call_validation() == -1 and not gsrender.validation()
    out.colors.sum().backward()
    assert seen == [expect]
    assert colors.grad is not None and colors.grad.abs().sum() > 0


def test_ops_take_validate(validation_off):
    # the raw ops run under the call's setting too (keyword-only)
    means, quats, scales, opac, colors, vm, Ks = _inputs("cpu")
    radii, m2d, depths, conics, o2d = ops.project(means, quats, scales, opac, vm, Ks, 32, 24, 0.3,
                                                  0.01, 1e10, 0.0, False)
    offs, ids = ops.bin_tiles(m2d, radii, depths, 32, 24, 16, True, validate=True)
    chans = torch.cat([colors[None], depths[..., None]], -1).contiguous()
    a = ops.rasterize(m2d, conics, o2d, chans, depths, None, offs, ids, 32, 24, 16, ops.SORTED,
                      [0.05, 1.0, 1e-3], "auto", False, validate=True)[0]
    b = ops.rasterize(m2d, conics, o2d, chans, depths, None, offs, ids, 32, 24, 16, ops.SORTED,
                      [0.05, 1.0, 1e-3])[0]
    torch.testing.assert_close(a, b, rtol=0, atol=0)  # the same call, only checked
    ops.weight_stats(m2d, conics, o2d, depths, offs, ids, 32, 24, 16, 0.1, 2, validate=True)
    ops.contributors(m2d, conics, o2d, depths, offs, ids, 32, 24, 16, K_max=4, validate=False)
    bad = offs.clone()
    bad.view(-1)[0] = ids.numel() + 5  # CPU: rejected whatever validate says
    with pytest.raises(ValueError, match="tile_offsets"):
        ops.rasterize(m2d, conics, o2d, chans, depths, None, bad, ids, 32, 24, 16, ops.SORTED,
                      [0.05, 1.0, 1e-3], validate=False)
    assert _C.call_validation() == -1


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_validate_true_checks_one_call(validation_off):
    means, quats, scales, opac, colors, vm, Ks = _inputs("cuda")
    means[3, 1] = float("nan")
    with pytest.raises(ValueError, match="means contains NaN"):
        gsrender.rasterize(means, quats, scales, opac, colors, vm, Ks, 32, 24, validate=True)
    gsrender.rasterize(means, quats, scales, opac, colors, vm, Ks, 32, 24)  # default: unchecked
    radii, m2d, depths, conics, o2d = ops.project(means.nan_to_num(), quats, scales, opac, vm, Ks,
                                                  32, 24, 0.3, 0.01, 1e10, 0.0, False)
    offs, ids = ops.bin_tiles(m2d, radii, depths, 32, 24, 16, True)
    bad = offs.clone()
    bad.view(-1)[0] = ids.numel() + 5
    chans = torch.cat([colors[None], depths[..., None]], -1).contiguous()
    with pytest.raises(ValueError, match="tile_offsets"):
        ops.rasterize(m2d, conics, o2d, chans, depths, None, bad, ids, 32, 24, 16, ops.SORTED,
                      [0.05, 1.0, 1e-3], validate=True)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_validate_false_call_makes_no_host_sync():
    # the suite runs with validation on; validate=False turns it off for one call
    means, quats, scales, opac, colors, vm, Ks = _inputs("cuda")
    radii, m2d, depths, conics, o2d = ops.project(means, quats, scales, opac, vm, Ks, 32, 24, 0.3,
                                                  0.01, 1e10, 0.0, False)
    offs, ids = ops.bin_tiles(m2d, radii, depths, 32, 24, 16, True)
    chans = torch.cat([colors[None], depths[..., None]], -1).contiguous()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        ops.rasterize(m2d, conics, o2d, chans, depths, None, offs, ids, 32, 24, 16, ops.SORTED,
                      [0.05, 1.0, 1e-3], validate=False)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@every_cpu_isa
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=("f32", "f64"))
@pytest.mark.parametrize("bad", ("nan", "inf", "-inf"))
@pytest.mark.parametrize("where", ("coeffs", "features", "camera_features"))
def test_sh_channels_kernel_checks_coeffs_and_features(dtype, bad, where, validation_off):
    # The CPU's SH path leaves these two finite checks to ops.sh_channels' kernel (render.py):
    # every Gaussian position (the 8-lane blocks, the scalar tail, a second camera's block,
    # several threads' blocks), through rasterize and through the op.
    g = torch.Generator().manual_seed(7)
    N, C, D = 4099, 2, 5
    means = torch.randn(N, 3, generator=g, dtype=dtype)
    campos = torch.tensor([[0.0, 0.0, -4.0], [0.5, 0.0, -4.0]], dtype=dtype)
    coeffs = 0.3 * torch.randn(N, 16, 3, generator=g, dtype=dtype)
    depths = torch.rand(C, N, generator=g, dtype=dtype) + 1
    feats = torch.rand(*((C,) if where == "camera_features" else ()), N, D, generator=g, dtype=dtype)
    assert ops.sh_channels(3, means, campos, coeffs, depths, feats).isfinite().all()
    name = "coeffs" if where == "coeffs" else "features"
    for n in (0, 7, 8, 2047, 2048, 4095, N - 1):
        x = (coeffs if where == "coeffs" else feats).clone()
        if where == "coeffs":
            x[n, n % 16, n % 3] = float(bad)
        elif x.dim() == 3:
            x[-1, n, n % D] = float(bad)  # the last camera's row
        else:
            x[n, n % D] = float(bad)
        args = (x, feats) if where == "coeffs" else (coeffs, x)
        with pytest.raises(ValueError, match=f"{name} .*contains NaN or Inf"):
            ops.sh_channels(3, means, campos, args[0], depths, args[1])
    s = random_scene(N=40, C=1, width=32, height=24, bg=False).cast(dtype)
    sh = 0.3 * torch.randn(40, 16, 3, generator=g, dtype=dtype)
    f = torch.rand(40, D, generator=g, dtype=dtype)
    (sh if where == "coeffs" else f)[5, 1] = float(bad)
    with pytest.raises(ValueError, match=f"{name} .*contains NaN or Inf"):
        gsrender.rasterize(s.means, s.quats, s.scales, s.opacities, sh, s.viewmats, s.Ks, 32, 24,
                           sh_degree=3, features=f)


@every_cpu_isa
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=("f32", "f64"))
def test_gaussian_faults_one_pass(dtype):
    # The CPU checks the Gaussians' values in one pass (_C.gaussian_faults, render.py): each fault
    # at Gaussians inside and at the ends of the vector chunks, the 1024-Gaussian blocks and the
    # threads' ranges, found alone, and rasterize raising its message.
    from gsrender.render import _GAUSSIAN_FAULTS

    g = torch.Generator().manual_seed(11)
    N = 5003
    base = {"means": torch.randn(N, 3, generator=g, dtype=dtype),
            "quats": torch.randn(N, 4, generator=g, dtype=dtype),
            "scales": torch.rand(N, 3, generator=g, dtype=dtype) + 0.01,
            "opacities": torch.rand(N, generator=g, dtype=dtype)}
    order = ("means", "quats", "scales", "opacities")
    assert _C.gaussian_faults(*base.values()) == 0
    faults = [(name, v, bit) for bit, name in enumerate(order)
              for v in (float("nan"), float("inf"), -float("inf"))]
    faults += [("scales", 0.0, 4), ("scales", -1e-30, 4), ("quats", 0.0, 5), ("opacities", -1e-7, 6),
               ("opacities", 1.0001, 6)]
    for name, v, bit in faults:
        for n in (0, 1, 7, 1023, 1024, 2501, N - 1):
            t = dict(base)
            t[name] = t[name].clone()
            if name == "quats" and v == 0.0:
                t[name][n] = 0.0  # a zero quaternion: every component
            elif name == "opacities":
                t[name][n] = v
            else:
                t[name][n, n % t[name].shape[1]] = v
            assert _C.gaussian_faults(*(t[k] for k in order)) == 1 << bit, (name, v, n)
    # the bound of a zero quaternion is |q| < 1e-12, as the tensor form's
    t = dict(base, quats=base["quats"].clone())
    t["quats"][9] = torch.tensor([1e-13, 0.0, 0.0, 0.0], dtype=dtype)
    assert _C.gaussian_faults(*(t[k] for k in order)) == 1 << 5
    t["quats"][9] = torch.tensor([2e-12, 0.0, 0.0, 0.0], dtype=dtype)
    assert _C.gaussian_faults(*(t[k] for k in order)) == 0
    s = random_scene(N=40, C=1, width=32, height=24, bg=False).cast(dtype)
    for bit, message in enumerate(_GAUSSIAN_FAULTS):
        t = {"means": s.means.clone(), "quats": s.quats.clone(), "scales": s.scales.clone(),
             "opacities": s.opacities.clone()}
        name = order[bit] if bit < 4 else ("scales", "quats", "opacities")[bit - 4]
        t[name].view(-1)[5] = float("nan") if bit < 4 else (-1.0 if name != "quats" else 1.0)
        if bit == 5:
            t["quats"][3] = 0.0
        with pytest.raises(ValueError, match=re.escape(message)):
            gsrender.rasterize(t["means"], t["quats"], t["scales"], t["opacities"], s.colors,
                               s.viewmats, s.Ks, 32, 24)
