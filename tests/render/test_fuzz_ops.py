"""Property fuzzing of the raw ops (torch.ops.gsrender.*): random shapes (0-sized, mismatched,
wrong rank), dtypes and values (NaN, Inf, huge, negative, denormal) must never crash the process.
Every call either returns tensors of the documented shapes and dtypes or raises ValueError,
TypeError or RuntimeError.

A crash (SIGSEGV, abort) would kill pytest itself, so the campaigns run in a child interpreter:
this file is also a script (`python tests/render/test_fuzz_ops.py project_fwd ...`). The child runs one
campaign after another and reports each; if it dies, the parent records the campaign it died in
and restarts the child on the rest. The child caps its address space (RLIMIT_AS) so a runaway
allocation fails instead of swapping the machine.

Examples per op: GSR_FUZZ_EXAMPLES (default 60). The search is derandomized (reproducible) unless
GSR_FUZZ_RANDOM=1, which explores new inputs each run.
"""
from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CAMPAIGNS = ("project_fwd", "project_bwd", "sh_fwd", "sh_bwd", "bin_tiles", "rasterize_fwd",
             "rasterize_bwd")
PROBES = ("huge_image_rasterize_fwd", "huge_image_bin_tiles", "width_past_int32_bin_tiles")
ADDRESS_SPACE_LIMIT = 10 << 30  # bytes; importing torch alone maps ~3.3 GiB
CHILD_TIMEOUT_S = 240

# ======================================================================= parent (pytest) side


def _run_child(names: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "2"}
    return subprocess.run([sys.executable, str(Path(__file__).resolve()), *names], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                          check=False)


def _describe(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit code {rc}"


def _collect(todo: list[str]) -> dict[str, tuple[str, str]]:
    """name -> (status, detail) for every campaign or probe in `todo`. status: 'ok' (detail: a
    summary, or a probe's result line), 'fail' (a property violation, with the falsifying
    input), 'crash' (the child died in it; the rest run in a new child)."""
    out: dict[str, tuple[str, str]] = {}
    while todo:
        res = _run_child(todo)
        current = None
        for line in res.stdout.splitlines():
            tag, _, rest = line.partition(" ")
            name, _, detail = rest.partition(" ")
            if tag == "BEGIN":
                current = name
            elif tag == "END":
                status, _, detail = detail.partition(" ")
                out[name] = (status, detail.replace("\\n", "\n"))
                current = None
        if res.returncode == 0 and all(n in out for n in todo):
            break
        crashed = current if current is not None else next(n for n in todo if n not in out)
        tail = (res.stdout[-1500:] + "\n--- stderr ---\n" + res.stderr[-3000:]).strip()
        out[crashed] = ("crash", f"child {_describe(res.returncode)} during {crashed}:\n{tail}")
        todo = [n for n in todo if n not in out]
    return out


@pytest.fixture(scope="module")
def reports() -> dict[str, tuple[str, str]]:
    return _collect(list(CAMPAIGNS) + list(PROBES))


def test_harness_attributes_a_crash_and_resumes():
    got = _collect(["selftest_ok", "selftest_segv", "selftest_ok2"])
    assert got["selftest_ok"][0] == "ok" and got["selftest_ok2"][0] == "ok", got
    assert got["selftest_segv"][0] == "crash" and "SIGSEGV" in got["selftest_segv"][1], got


@pytest.mark.parametrize("op", CAMPAIGNS)
def test_fuzz_op_never_crashes(reports, op):
    status, detail = reports[op]
    assert status == "ok", f"{op}: {status}\n{detail}"


def _probe(reports, name: str) -> str:
    status, detail = reports[name]
    assert status != "crash", detail
    return detail


def test_huge_image_rasterize_fwd_raises_clear_error(reports):
    detail = _probe(reports, "huge_image_rasterize_fwd")
    assert detail.startswith("ValueError") and ("width" in detail or "height" in detail), detail


def test_huge_image_bin_tiles_raises_clear_error(reports):
    detail = _probe(reports, "huge_image_bin_tiles")
    assert detail.startswith("ValueError") and ("width" in detail or "height" in detail), detail


def test_width_past_int32_is_rejected(reports):
    detail = _probe(reports, "width_past_int32_bin_tiles")
    assert detail.startswith("ValueError") and "width" in detail, detail


# ========================================================================= child (campaigns)
# Everything below runs only in the child interpreter.


def _child_main(names: list[str]) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash must not drop a core file
    if names and names[0].startswith("selftest"):  # the harness's own check: no torch needed
        for name in names:
            print(f"BEGIN {name}", flush=True)
            if name == "selftest_segv":
                os.kill(os.getpid(), signal.SIGSEGV)
            print(f"END {name} ok", flush=True)
        return
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    import torch

    torch.set_num_threads(2)
    from gsrender import _C  # noqa: F401  (registers torch.ops.gsrender.*)

    fz = _Fuzzer(torch)
    for name in names:
        print(f"BEGIN {name}", flush=True)
        try:
            detail = fz.probe(name) if name in PROBES else fz.campaign(name)
            status = "ok"
        except Exception:  # noqa: BLE001  (a property violation: report it, go on with the next)
            status, detail = "fail", traceback.format_exc()
        print(f"END {name} {status} " + detail.replace("\n", "\\n"), flush=True)


class _Fuzzer:
    """Hypothesis campaigns over one op each. Inputs start from a valid, realistic argument set
    (so the kernels run, not just the checks) and get 0-3 random mutations: shape, dtype, values
    (regimes below), scalar arguments, and for the rasterizer the binning arrays."""

    ALLOWED = (ValueError, TypeError, RuntimeError)

    def __init__(self, torch):
        self.t = torch
        self.O = torch.ops.gsrender
        from gsrender import ops
        self.plan_len = len(ops.PLAN_FIELDS)  # rasterize's plan output
        self.ops = {
            "project_fwd": (self._project_fwd_args, self._check_project_fwd),
            "project_bwd": (self._project_bwd_args, self._check_project_bwd),
            "sh_fwd": (self._sh_fwd_args, self._check_sh_fwd),
            "sh_bwd": (self._sh_bwd_args, self._check_sh_bwd),
            "bin_tiles": (self._bin_tiles_args, self._check_bin_tiles),
            "rasterize_fwd": (self._rasterize_fwd_args, self._check_rasterize_fwd),
            "rasterize_bwd": (self._rasterize_bwd_args, self._check_rasterize_bwd),
        }

    # -------------------------------------------------------------------------- campaigns

    def campaign(self, name: str) -> str:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st

        make_args, check = self.ops[name]
        op = getattr(self.O, name)
        counts = {"returned": 0, "raised": 0}

        @settings(max_examples=int(os.environ.get("GSR_FUZZ_EXAMPLES", "60")), deadline=None,
                  database=None, derandomize=os.environ.get("GSR_FUZZ_RANDOM") != "1",
                  suppress_health_check=list(HealthCheck), print_blob=False)
        @given(st.data())
        def prop(data):
            args = make_args(data.draw)
            try:
                out = op(*args)
            except self.ALLOWED:
                counts["raised"] += 1
                return
            except BaseException as e:
                raise AssertionError(f"{name} raised {type(e).__name__}: {e}\n"
                                     f"args: {self._show(args)}") from e
            try:
                check(args, out)
            except AssertionError as e:
                raise AssertionError(f"{name} returned wrong outputs: {e}\n"
                                     f"args: {self._show(args)}") from e
            counts["returned"] += 1

        prop()
        return f"{counts['returned']} returned, {counts['raised']} raised"

    # ------------------------------------------------------------------------ value regimes

    def _fill(self, draw, shape, dtype):
        """A tensor of `shape`/`dtype` whose values come from a drawn regime."""
        from hypothesis import strategies as st

        t = self.t
        g = t.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
        if dtype == t.bool:
            return t.rand(shape, generator=g) > 0.5
        if not dtype.is_floating_point:
            lo, hi = draw(st.sampled_from([(-3, 70), (-(2**31), 2**31 - 1), (0, 3), (-1, 0)]))
            if dtype == t.int16:
                lo, hi = max(lo, -(2**15)), min(hi, 2**15 - 1)
            return t.randint(lo, hi, shape, generator=g, dtype=t.int64).to(dtype)
        regime = draw(st.sampled_from(["normal", "huge", "tiny", "denormal", "negative", "zeros",
                                       "special", "sprinkled"]))
        base = t.randn(shape, generator=g, dtype=t.float64)
        big = t.finfo(dtype).max
        if regime == "huge":
            base = base * big / 4
        elif regime == "tiny":
            base = base * 1e-30
        elif regime == "denormal":
            base = base * t.finfo(dtype).tiny / 8  # below the smallest normal number
        elif regime == "negative":
            base = -base.abs() * 10
        elif regime == "zeros":
            base = base * 0
        specials = t.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, big, -big,
                             t.finfo(dtype).tiny / 4, 1e-45, 1.0], dtype=t.float64)
        if regime in ("special", "sprinkled") and base.numel():
            pick = specials[t.randint(0, len(specials), shape, generator=g)]
            mask = t.rand(shape, generator=g) < (1.0 if regime == "special" else 0.2)
            base = t.where(mask, pick, base)
        return base.to(dtype)

    def _mutate_shape(self, draw, shape):
        from hypothesis import strategies as st

        kind = draw(st.sampled_from(["random", "grow", "shrink", "zero", "add_dim", "drop_dim"]))
        s = list(shape)
        if kind == "random":
            return tuple(draw(st.lists(st.integers(0, 5), max_size=4)))
        if not s or kind == "add_dim":
            return tuple([draw(st.integers(0, 3))] + s)
        i = draw(st.integers(0, len(s) - 1))
        if kind == "drop_dim":
            return tuple(s[:i] + s[i + 1:])
        s[i] = {"grow": s[i] + 1, "shrink": max(s[i] - 1, 0), "zero": 0}[kind]
        return tuple(s)

    def _mutate(self, draw, args: list, tensor_idx: list[int], scalar_gen: dict, n_max: int = 3):
        """Applies 0..n_max random mutations in place to the positional `args`."""
        from hypothesis import strategies as st

        t = self.t
        for _ in range(draw(st.integers(0, n_max))):
            what = draw(st.sampled_from(["values", "values", "shape", "dtype", "scalar",
                                         "noncontiguous"]))
            if what == "scalar" and scalar_gen:
                i = draw(st.sampled_from(sorted(scalar_gen)))
                args[i] = draw(scalar_gen[i])
                continue
            i = draw(st.sampled_from(tensor_idx))
            x = args[i]
            if x is None:
                continue
            if what == "values":
                args[i] = self._fill(draw, tuple(x.shape), x.dtype)
            elif what == "shape":
                args[i] = self._fill(draw, self._mutate_shape(draw, x.shape), x.dtype)
            elif what == "dtype":
                dt = draw(st.sampled_from([t.float32, t.float64, t.float16, t.int32, t.int64,
                                           t.int16, t.bool]))
                args[i] = x.to(dt)
            elif x.dim() >= 2 and x.shape[-1] > 1:  # a non-contiguous view with the same values
                args[i] = x.transpose(-1, -2).contiguous().transpose(-1, -2)
        return args

    def _sizes(self, draw):
        from hypothesis import strategies as st

        C = draw(st.integers(0, 3))
        N = draw(st.sampled_from([0, 1, 2, 5, 17, 40]))
        W = draw(st.integers(1, 64))
        H = draw(st.integers(1, 64))
        dtype = draw(st.sampled_from([self.t.float32, self.t.float64]))
        return C, N, W, H, dtype

    def _scene(self, draw, C, N, W, H, dtype):
        """Valid projection inputs: Gaussians in front of C cameras, some near or off the edges."""
        from hypothesis import strategies as st

        t = self.t
        g = t.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
        means = t.randn(N, 3, generator=g, dtype=dtype) * t.tensor([1.5, 1.5, 1.0], dtype=dtype)
        means[:, 2] += 4
        quats = t.randn(N, 4, generator=g, dtype=dtype)
        scales = t.exp(t.randn(N, 3, generator=g, dtype=dtype) - 2)
        opac = t.rand(N, generator=g, dtype=dtype)
        vm = t.eye(4, dtype=dtype).repeat(C, 1, 1)
        vm[:, :3, 3] = 0.3 * t.randn(C, 3, generator=g, dtype=dtype)
        f = 0.8 * max(W, H) * (1 + t.rand(C, generator=g, dtype=dtype))
        Ks = t.zeros(C, 3, 3, dtype=dtype)
        Ks[:, 0, 0], Ks[:, 1, 1], Ks[:, 2, 2] = f, f, 1
        Ks[:, 0, 2], Ks[:, 1, 2] = W / 2, H / 2
        return means, quats, scales, opac, vm, Ks

    @staticmethod
    def _floats():
        from hypothesis import strategies as st

        return st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                         st.sampled_from([0.0, -1.0, 0.3, 1e-3, 1e10]))

    @staticmethod
    def _sizes_or_bad():
        from hypothesis import strategies as st

        return st.one_of(st.integers(1, 64), st.sampled_from([0, -1, -64]))

    # -------------------------------------------------------------------- per-op inputs

    def _project_fwd_args(self, draw):
        from hypothesis import strategies as st

        C, N, W, H, dtype = self._sizes(draw)
        scalars = [W, H, 0.3, 0.01, 1e10, 0.0, draw(st.booleans())]
        args = list(self._scene(draw, C, N, W, H, dtype)) + scalars
        fl = self._floats()
        return self._mutate(draw, args, list(range(6)), {
            6: self._sizes_or_bad(), 7: self._sizes_or_bad(), 8: fl, 9: fl, 10: fl, 11: fl})

    def _project_bwd_args(self, draw):
        from hypothesis import strategies as st

        t = self.t
        C, N, W, H, dtype = self._sizes(draw)
        scene = self._scene(draw, C, N, W, H, dtype)
        aa = draw(st.booleans())
        radii = self.O.project_fwd(*scene, W, H, 0.3, 0.01, 1e10, 0.0, aa)[0]
        g = t.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
        grads = [t.randn(*s, generator=g, dtype=dtype) for s in
                 ((C, N, 2), (C, N), (C, N, 3), (C, N))]
        args = list(scene) + [W, H, 0.3, aa, radii] + grads
        return self._mutate(draw, args, [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14], {
            6: self._sizes_or_bad(), 7: self._sizes_or_bad(), 8: self._floats()})

    def _sh_fwd_args(self, draw):
        from hypothesis import strategies as st

        C, N, _, _, dtype = self._sizes(draw)
        deg = draw(st.integers(0, 3))
        K = draw(st.sampled_from([(deg + 1) ** 2, 16, 25]))
        args = [deg, self._fill(draw, (C, N, 3), dtype), self._fill(draw, (N, K, 3), dtype)]
        return self._mutate(draw, args, [1, 2], {0: st.integers(-2, 5)})

    def _sh_bwd_args(self, draw):
        args = self._sh_fwd_args(draw)
        dirs = args[1]
        v = self._fill(draw, tuple(dirs.shape) if dirs.dim() == 3 else (1, 1, 3), self.t.float32)
        v = v.to(dirs.dtype) if dirs.is_floating_point() else v
        return self._mutate(draw, args + [v], [1, 2, 3], {}, n_max=1)

    def _projected(self, draw):
        """(C, N, W, H, dtype, radii, means2d, depths, conics, opacities2d) of a valid scene."""
        C, N, W, H, dtype = self._sizes(draw)
        scene = self._scene(draw, C, N, W, H, dtype)
        return (C, N, W, H, dtype) + tuple(self.O.project_fwd(*scene, W, H, 0.3, 0.01, 1e10, 0.0,
                                                              False))

    def _bin_tiles_args(self, draw):
        from hypothesis import strategies as st

        _, _, W, H, _, radii, m2d, depths, _, _ = self._projected(draw)
        args = [m2d, radii, depths, W, H, draw(st.sampled_from([1, 4, 8, 16, 64])),
                draw(st.booleans())]
        return self._mutate(draw, args, [0, 1, 2], {
            3: self._sizes_or_bad(), 4: self._sizes_or_bad(),
            5: st.sampled_from([0, -1, 1, 3, 16, 256, 257, 1000])})

    def _binning_mutations(self, draw, offsets, ids, C, N):
        """Corrupted tile_offsets / flatten_ids: garbage, or plausible edits of the real ones."""
        from hypothesis import strategies as st

        t = self.t
        kind = draw(st.sampled_from(["keep", "keep", "garbage_offsets", "garbage_ids",
                                     "permute_ids", "shift_offset", "truncate_ids", "extend_ids"]))
        offsets, ids = offsets.clone(), ids.clone()
        g = t.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
        if kind == "garbage_offsets":
            offsets = self._fill(draw, tuple(offsets.shape), t.int32)
        elif kind == "garbage_ids":
            ids = self._fill(draw, tuple(ids.shape), t.int32)
        elif kind == "permute_ids" and ids.numel():
            ids = ids[t.randperm(ids.numel(), generator=g)]
        elif kind == "shift_offset" and offsets.numel():
            flat = offsets.view(-1)
            flat[t.randint(0, flat.numel(), (1,), generator=g)] += draw(st.sampled_from([-1, 1, 5]))
        elif kind == "truncate_ids" and ids.numel():
            ids = ids[: draw(st.integers(0, ids.numel() - 1))]
        elif kind == "extend_ids":
            ids = t.cat([ids, t.randint(0, max(C * N, 1), (3,), generator=g, dtype=t.int32)])
        return offsets, ids

    def _rasterize_fwd_args(self, draw):
        from hypothesis import strategies as st

        C, N, W, H, dtype, radii, m2d, depths, conics, o2d = self._projected(draw)
        mode = draw(st.sampled_from([0, 1]))
        precision = draw(st.sampled_from(["auto", "fp32"]))
        ts = draw(st.sampled_from([1, 4, 8, 16, 64]))
        offsets, ids = self.O.bin_tiles(m2d, radii, depths, W, H, ts, mode == 0)
        offsets, ids = self._binning_mutations(draw, offsets, ids, C, N)
        CH = draw(st.sampled_from([1, 3, 4, 7, 33]))
        colors = self._fill(draw, (C, N, CH), dtype)
        bg = self._fill(draw, (C, CH), dtype) if draw(st.booleans()) else None
        args = [m2d, conics, o2d, colors, depths, bg, offsets, ids, W, H, ts, mode,
                [0.05, 1.0, 1e-3], precision]
        wp = st.lists(self._floats(), max_size=4)
        args = self._mutate(draw, args, [0, 1, 2, 3, 4, 5, 6, 7], {
            8: self._sizes_or_bad(), 9: self._sizes_or_bad(),
            10: st.sampled_from([0, -1, 1, 16, 257]), 11: st.integers(-1, 2), 12: wp,
            13: st.sampled_from(["auto", "fp32", "fp64", ""])})
        return args

    def _rasterize_bwd_args(self, draw):
        """Backward inputs: the forward's outputs for the same (possibly corrupted) binning, so
        last_ids stay inside their tile's run. last_ids is then only corrupted outside
        [0, len(flatten_ids)]: an in-range id past its own tile's run crashes rasterize_bwd
        (pinned by test_bad_inputs.py::test_raw_rasterize_bwd_last_ids_outside_tile_run_raises)."""
        from hypothesis import strategies as st

        t = self.t
        fwd = self._rasterize_fwd_args(draw)
        fwd[13] = "auto"
        try:
            render, alphas, last_ids, aux, _, plan = self.O.rasterize_fwd(*fwd)
        except self.ALLOWED:
            # invalid forward inputs: backward gets placeholders and must reject the same inputs
            C, H, W = 1, 1, 1
            render, alphas = t.zeros(C, H, W, 1), t.zeros(C, H, W, 1)
            last_ids, aux = t.zeros(C, H, W, dtype=t.int32), t.zeros(C, H, W)
            # a plan of the right shape: the inputs are what is refused
            plan = t.tensor([1, 1] + [0] * (self.plan_len - 2))
        g = t.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
        v_render = t.randn(render.shape, generator=g, dtype=render.dtype)
        v_alphas = t.randn(alphas.shape, generator=g, dtype=alphas.dtype)
        args = fwd[:13] + [render, alphas, last_ids, aux, v_render, v_alphas, plan]
        args = self._mutate(draw, args, [0, 1, 2, 3, 4, 5, 13, 14, 16, 17, 18, 19], {}, n_max=2)
        if draw(st.integers(0, 4)) == 0 and last_ids.numel():
            last = last_ids.clone().view(-1)
            M = fwd[7].numel() if isinstance(fwd[7], t.Tensor) else 0
            last[t.randint(0, last.numel(), (1,), generator=g)] = draw(
                st.sampled_from([-1, M + 1, 2**31 - 1, -(2**31)]))
            args[15] = last.view(last_ids.shape)
        return args

    # ------------------------------------------------------------------ output contracts

    def _expect(self, out, specs):
        t = self.t
        assert isinstance(out, (tuple, list)) and len(out) == len(specs), f"got {type(out)}"
        for i, (x, (shape, dtype)) in enumerate(zip(out, specs)):
            assert isinstance(x, t.Tensor), f"output {i} is {type(x).__name__}"
            assert tuple(x.shape) == tuple(shape), f"output {i} shape {tuple(x.shape)} != {shape}"
            assert x.dtype == dtype, f"output {i} dtype {x.dtype} != {dtype}"

    def _check_project_fwd(self, a, out):
        C, N, dt = a[4].shape[0], a[0].shape[0], a[0].dtype
        self._expect(out, [((C, N, 2), self.t.int32), ((C, N, 2), dt), ((C, N), dt),
                           ((C, N, 3), dt), ((C, N), dt)])
        assert (out[0] >= 0).all(), "negative radii"

    def _check_project_bwd(self, a, out):
        C, N, dt = a[4].shape[0], a[0].shape[0], a[0].dtype
        self._expect(out, [((N, 3), dt), ((N, 4), dt), ((N, 3), dt), ((N,), dt), ((C, 4, 4), dt)])

    def _check_sh_fwd(self, a, out):
        out = out if isinstance(out, (tuple, list)) else [out]
        self._expect(out, [(tuple(a[1].shape), a[1].dtype)])

    def _check_sh_bwd(self, a, out):
        self._expect(out, [(tuple(a[1].shape), a[1].dtype), (tuple(a[2].shape), a[1].dtype)])

    def _check_bin_tiles(self, a, out):
        t = self.t
        m2d, W, H, ts = a[0], a[3], a[4], a[5]
        C, N = m2d.shape[:2]
        offsets, ids = out
        M = ids.shape[0] if ids.dim() == 1 else -1
        self._expect(out, [((C, -(-H // ts), -(-W // ts)), t.int32), ((M,), t.int32)])
        flat = offsets.reshape(-1).long()
        assert ((flat >= 0) & (flat <= M)).all(), "tile_offsets outside [0, M]"
        assert (flat[1:] >= flat[:-1]).all(), "tile_offsets decrease"
        assert ((ids >= 0) & (ids < C * N)).all(), "flatten_ids outside [0, C*N)"

    def _check_rasterize_fwd(self, a, out):
        t = self.t
        C, dt, CH, W, H = a[0].shape[0], a[0].dtype, a[3].shape[2], a[8], a[9]
        self._expect(out, [((C, H, W, CH), dt), ((C, H, W, 1), dt), ((C, H, W), t.int32),
                           ((C, H, W), dt), ((C, 3), t.int64), ((self.plan_len,), t.int64)])
        M = a[7].shape[0]
        assert ((out[2] >= 0) & (out[2] <= M)).all(), "last_ids outside [0, M]"

    def _check_rasterize_bwd(self, a, out):
        C, N, dt, CH = a[0].shape[0], a[0].shape[1], a[0].dtype, a[3].shape[2]
        self._expect(out, [((C, N, 2), dt), ((C, N, 3), dt), ((C, N), dt), ((C, N, CH), dt),
                           ((C, N), dt), ((C, CH), dt)])

    # ------------------------------------------------------------------------------ probes

    def probe(self, name: str) -> str:
        """One oversized request; returns 'returned ...' or 'ExcType: message'."""
        t, O = self.t, self.O
        m2d = t.tensor([[[8.0, 8.0], [50.0, 40.0]]])
        radii = t.tensor([[[3, 3], [5, 5]]], dtype=t.int32)
        depths = t.ones(1, 2)
        try:
            if name == "huge_image_rasterize_fwd":
                W = H = 100_000
                ts = 256
                offsets = t.zeros(1, -(-H // ts), -(-W // ts), dtype=t.int32)
                out = O.rasterize_fwd(m2d, t.tensor([[[0.1, 0.0, 0.1]] * 2]), t.full((1, 2), 0.5),
                                      t.ones(1, 2, 4), depths, None, offsets,
                                      t.zeros(0, dtype=t.int32), W, H, ts, 0, [], "auto")
            elif name == "huge_image_bin_tiles":
                out = O.bin_tiles(m2d, radii, depths, 100_000, 100_000, 16, True)
            elif name == "width_past_int32_bin_tiles":
                out = O.bin_tiles(m2d, radii, depths, 2**32 + 16, 64, 16, True)
            else:
                raise KeyError(name)
        except Exception as e:  # noqa: BLE001  (the probe reports whatever was raised)
            return f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        return "returned " + ", ".join(str(tuple(x.shape)) for x in out)

    # ------------------------------------------------------------------------------ helpers

    def _show(self, args) -> str:
        t = self.t
        parts = []
        for x in args:
            if isinstance(x, t.Tensor):
                v = x.flatten()[:6].tolist() if x.numel() else []
                parts.append(f"Tensor{tuple(x.shape)}:{str(x.dtype)[6:]}{v}")
            else:
                parts.append(repr(x))
        return "(" + ", ".join(parts) + ")"


if __name__ == "__main__":
    _child_main(sys.argv[1:] or list(CAMPAIGNS))
