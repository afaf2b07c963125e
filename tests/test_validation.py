"""Value checks (finite, ranges, tile-list consistency): always on the CPU, on CUDA only under
validation, so that a default CUDA call makes no host sync (csrc/include/gsrender/validation.h)."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch
from conftest import F32, random_scene

import gsrender
from gsrender import _C, ops
from gsrender import reference as ref


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
    assert c["alpha_min"] * c["alpha_min_inv"] == 1.0 and c["alpha_min_inv"] == 255.0


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
