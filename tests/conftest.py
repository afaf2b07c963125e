"""Shared helpers of the renderer's acceptance tests: the shared data folder, small scene builders
(float64 masters, cast per test) and the comparison against the dense float64 reference.

A Scene holds float64 tensors; `scene.cast(dtype)` gives the inputs a test feeds gsrender, and the
reference is always evaluated in float64 on exactly those (cast back) values, so the only
difference between the two is the arithmetic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from pathlib import Path

import pytest
import torch

import gsrender
from gsrender import _C
from gsrender import reference as ref
from gsrender.io import paths

# CUDA calls check tensor values only under validation (a host sync each; the CPU always
# checks): the suite runs with it on, as a user debugging would (test_validation.py turns it off
# to check that the default CUDA path makes no host sync).
gsrender.set_validation(True)

DATA = paths.data_dir()
# the real trained scene the repository ships (data/README.md: its origin and licence)
PLANT = Path(__file__).resolve().parents[1] / "data" / "plant" / "plant.splat"
F32, F64 = torch.float32, torch.float64
OUT_KEYS = ("colors", "depths", "alphas", "features")


# ------------------------------------------------------------------------------------ cameras


def intrinsics(fx, fy, cx, cy, dtype=F64) -> torch.Tensor:
    return torch.tensor([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]], dtype=dtype)


def rotation(ax: float, ay: float, az: float, dtype=F64) -> torch.Tensor:
    """Rz·Ry·Rx."""
    cx, sx, cy, sy, cz, sz = (math.cos(ax), math.sin(ax), math.cos(ay), math.sin(ay),
                              math.cos(az), math.sin(az))
    Rx = torch.tensor([[1, 0, 0], [0, cx, -sx], [0, sx, cx]], dtype=dtype)
    Ry = torch.tensor([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]], dtype=dtype)
    Rz = torch.tensor([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]], dtype=dtype)
    return Rz @ Ry @ Rx


def viewmat(R: torch.Tensor, t) -> torch.Tensor:
    V = torch.eye(4, dtype=R.dtype)
    V[:3, :3] = R
    V[:3, 3] = torch.as_tensor(t, dtype=R.dtype)
    return V


def cameras(C: int, width: int, height: int, seed: int = 0, dist: float = 4.0, angle: float = 0.35):
    """C cameras at distance `dist` from the origin looking roughly at it from different poses
    (rotations up to ~angle rad, the camera looks down its +z), non-square pixels and principal
    points off the image centre. -> viewmats [C,4,4], Ks [C,3,3] (float64)."""
    g = torch.Generator().manual_seed(seed)
    vms, Ks = [], []
    for _ in range(C):
        a = (torch.rand(3, generator=g, dtype=F64) * 2 - 1) * angle
        R = rotation(float(a[0]), float(a[1]), float(a[2]) * 2)
        # the origin sits at camera point (small offset, dist): t = that point
        t = torch.tensor([0.0, 0.0, dist], dtype=F64) + 0.2 * torch.randn(3, generator=g, dtype=F64)
        vms.append(viewmat(R, t))
        f = 0.9 * max(width, height) * (1 + 0.2 * float(torch.rand(1, generator=g)))
        aspect = 1 + 0.1 * (float(torch.rand(1, generator=g)) - 0.5)
        cx = width / 2 + 0.1 * width * (float(torch.rand(1, generator=g)) - 0.5)
        cy = height / 2 + 0.1 * height * (float(torch.rand(1, generator=g)) - 0.5)
        Ks.append(intrinsics(f, f * aspect, cx, cy))
    return torch.stack(vms), torch.stack(Ks)


# ------------------------------------------------------------------------------------- scenes


@dataclass
class Scene:
    """Renderer inputs (float64 masters). colors: RGB [N,3] / [C,N,3] or SH [N,K,3] with sh_degree."""

    means: torch.Tensor
    quats: torch.Tensor
    scales: torch.Tensor
    opacities: torch.Tensor
    colors: torch.Tensor
    viewmats: torch.Tensor
    Ks: torch.Tensor
    width: int
    height: int
    features: torch.Tensor | None = None
    backgrounds: torch.Tensor | None = None
    sh_degree: int | None = None

    @property
    def N(self) -> int:
        return int(self.means.shape[0])

    @property
    def C(self) -> int:
        return int(self.viewmats.shape[0])

    def cast(self, dtype) -> Scene:
        conv = {f.name: getattr(self, f.name).to(dtype) for f in fields(self)
                if isinstance(getattr(self, f.name), torch.Tensor)}
        return replace(self, **conv)

    def subset(self, idx) -> Scene:
        per_n = {k: getattr(self, k)[idx] for k in ("means", "quats", "scales", "opacities")}
        col = self.colors[:, idx] if (self.sh_degree is None and self.colors.dim() == 3) \
            else self.colors[idx]
        feat = None if self.features is None else (
            self.features[idx] if self.features.dim() == 2 else self.features[:, idx])
        return replace(self, colors=col, features=feat, **per_n)

    def inputs(self) -> tuple:
        return (self.means, self.quats, self.scales, self.opacities, self.colors, self.viewmats,
                self.Ks, self.width, self.height)

    def kwargs(self) -> dict:
        return {"sh_degree": self.sh_degree, "features": self.features, "backgrounds": self.backgrounds}


def random_scene(N: int = 300, C: int = 2, width: int = 40, height: int = 30, seed: int = 0,
                 D: int = 0, bg: bool = True, radius: float = 1.2,
                 scale_range=(0.02, 0.3)) -> Scene:
    """N random Gaussians in a ball of `radius` around the origin (in view of `cameras`),
    log-uniform scales, random rotations, opacities in [0.05, 0.99], RGB colours, D features."""
    g = torch.Generator().manual_seed(seed)
    d = torch.randn(N, 3, generator=g, dtype=F64)
    means = d / d.norm(dim=-1, keepdim=True) * radius * torch.rand(N, 1, generator=g, dtype=F64) ** (1 / 3)
    lo, hi = math.log(scale_range[0]), math.log(scale_range[1])
    scales = torch.exp(lo + (hi - lo) * torch.rand(N, 3, generator=g, dtype=F64))
    quats = torch.randn(N, 4, generator=g, dtype=F64)
    opac = 0.05 + 0.94 * torch.rand(N, generator=g, dtype=F64)
    colors = torch.rand(N, 3, generator=g, dtype=F64)
    feats = torch.randn(N, D, generator=g, dtype=F64) if D else None
    vms, Ks = cameras(C, width, height, seed=seed + 1000)
    bgs = torch.rand(C, 3, generator=g, dtype=F64) if bg else None
    return Scene(means, quats, scales, opac, colors, vms, Ks, width, height, features=feats,
                 backgrounds=bgs)


def scene_from_model(model, viewmats, Ks, width: int, height: int, rgb: bool = True) -> Scene:
    """A Scene from a gsrender GaussianModel: degree-0 RGB (SH DC + 0.5, clamped) when rgb, else
    its SH coefficients with sh_degree."""
    m = model.to(F64)
    if rgb:
        colors, deg = torch.clamp_min(m.sh[:, 0] * ref.SH_C0 + 0.5, 0.0), None
    else:
        colors, deg = m.sh, m.sh_degree
    return Scene(m.means, m.quats, m.scales, m.opacities, colors, viewmats.to(F64), Ks.to(F64),
                 width, height, features=m.features, sh_degree=deg)


# ------------------------------------------------------------------------------ render + compare


def render(scene: Scene, **kw) -> gsrender.RenderOutput:
    return gsrender.rasterize(*scene.inputs(), **scene.kwargs(), **kw)


PROJ_KW = ("near_plane", "far_plane", "eps2d", "radius_clip", "antialiased")
REF_KW = PROJ_KW + ("mode", "weight_params")


def render_ref(scene: Scene, band: int | None = None, **kw) -> dict:
    """reference.render in float64 of the scene's (possibly float32-rounded) values.

    band=B evaluates reference.rasterize on horizontal bands of B rows, each with only the
    Gaussians whose reference box (radii) reaches the band. Same result (a Gaussian outside its
    box has α < 1/255 at every pixel: it never contributes, nor changes T), far fewer dense pairs:
    for the larger real-data scenes."""
    s = scene.cast(F64)
    kw = {k: v for k, v in kw.items() if k in REF_KW}
    if band is None:
        return ref.render(*s.inputs(), **s.kwargs(), **kw)
    meta = _project(s, **kw)
    C, N, H, W = s.C, s.N, s.height, s.width
    if s.sh_degree is None:
        rgb = s.colors.expand(C, N, 3)
    else:
        rgb = ref.sh_colors(s.means, s.colors, s.viewmats, s.sh_degree)
    chans = [rgb, meta["depths"][..., None]]
    D = 0 if s.features is None else s.features.shape[-1]
    if D:
        chans.append(s.features.expand(C, N, D))
    chans = torch.cat(chans, -1)  # [C,N,4+D]
    bg = torch.zeros(C, 4 + D, dtype=F64)
    if s.backgrounds is not None:
        bg[:, :3] = s.backgrounds
    out = torch.zeros(C, H, W, 4 + D, dtype=F64)
    alphas = torch.zeros(C, H, W, 1, dtype=F64)
    rk = {k: kw[k] for k in ("mode", "weight_params") if k in kw}
    for c, y0, y1, sel in _bands(meta, s, band):
        shift = torch.tensor([0.0, float(y0)], dtype=F64)
        o, a = ref.rasterize(meta["means2d"][c:c + 1, sel] - shift, meta["conics"][c:c + 1, sel],
                             meta["opacities2d"][c:c + 1, sel], chans[c:c + 1, sel],
                             meta["depths"][c:c + 1, sel], W, y1 - y0, backgrounds=bg[c:c + 1],
                             valid=torch.ones(1, sel.numel(), dtype=torch.bool), **rk)
        out[c, y0:y1], alphas[c, y0:y1] = o[0], a[0]
    return {"colors": out[..., :3], "depths": out[..., 3:4],
            "features": out[..., 4:] if s.features is not None else None, "alphas": alphas,
            "meta": meta}


def _project(s: Scene, **kw) -> dict:
    return ref.project(s.means, s.quats, s.scales, s.opacities, s.viewmats, s.Ks, s.width,
                       s.height, **{k: v for k, v in kw.items() if k in PROJ_KW})


def _bands(meta: dict, s: Scene, band: int):
    """(camera, y0, y1, indices of the valid Gaussians whose box reaches rows y0..y1-1)."""
    for c in range(s.C):
        valid = meta["radii"][c].amax(-1) > 0
        my, ry = meta["means2d"][c, :, 1], meta["radii"][c, :, 1].to(F64)
        for y0 in range(0, s.height, band):
            y1 = min(s.height, y0 + band)
            yield c, y0, y1, (valid & (my - ry < y1) & (my + ry > y0)).nonzero().squeeze(1)


def max_errors(out: gsrender.RenderOutput, expected: dict, mask: torch.Tensor | None = None) -> dict:
    """Max abs error per output over pixels where mask [C,H,W] is False (all when None)."""
    errs = {}
    for k in OUT_KEYS:
        a, b = getattr(out, k), expected[k]
        if b is None:
            assert a is None, k
            continue
        assert a is not None and a.shape == b.shape, (k, None if a is None else a.shape, b.shape)
        e = (a.double() - b).abs()
        if mask is not None:
            e = e[~mask]
        errs[k] = float(e.max()) if e.numel() else 0.0
    return errs


def assert_matches(out, expected, tol: float, mask=None, what: str = ""):
    errs = max_errors(out, expected, mask)
    bad = {k: v for k, v in errs.items() if not v <= tol}
    assert not bad, f"{what} max abs error above {tol}: {bad}"
    return errs


def default_tol(dtype) -> float:
    return 1e-10 if dtype == F64 else 1e-4


def pair_alphas(scene: Scene, band: int = 16, **kw):
    """Yields (camera, y0, y1, A [P,n], raw [P,n], z [n]) per band of rows: A the clamped α with
    the 1/255 cut applied, raw = o·exp(−σ), for the reference-valid Gaussians reaching the band,
    in stable depth order (rows y0..y1-1, row-major), from the float64 reference projection."""
    s = scene.cast(F64)
    meta = _project(s, **kw)
    for c, y0, y1, idx in _bands(meta, s, band):
        idx = idx[torch.sort(meta["depths"][c, idx], stable=True).indices]
        z = meta["depths"][c, idx]
        m2d, con, o = meta["means2d"][c, idx], meta["conics"][c, idx], meta["opacities2d"][c, idx]
        ys, xs = torch.meshgrid(torch.arange(y0, y1, dtype=F64), torch.arange(s.width, dtype=F64),
                                indexing="ij")
        pix = torch.stack([xs, ys], -1).reshape(-1, 2) + 0.5  # [P,2]
        d = m2d[None] - pix[:, None]  # [P,n,2]
        a, b, cc = con.unbind(-1)
        sig = 0.5 * (a * d[..., 0] ** 2 + cc * d[..., 1] ** 2) + b * d[..., 0] * d[..., 1]
        raw = torch.where(sig >= 0, o * torch.exp(-sig.clamp_min(0)), torch.zeros_like(sig))
        A = torch.where(raw >= ref.ALPHA_MIN, raw.clamp_max(ref.ALPHA_MAX), torch.zeros_like(raw))
        yield c, y0, y1, A, raw, z


def stopped_pixels(scene: Scene, **kw) -> torch.Tensor:
    """Pixels [C,H,W] where sorted mode's early stop (T·(1−α) < 1e-4) excludes a Gaussian."""
    out = torch.zeros(scene.C, scene.height, scene.width, dtype=torch.bool)
    for c, y0, y1, A, _, _ in pair_alphas(scene, **kw):
        if A.shape[1]:
            out[c, y0:y1] = (torch.cumprod(1 - A, -1)[:, -1] < ref.TRANSMITTANCE_MIN).reshape(y1 - y0, -1)
    return out


def ambiguous_pixels(scene: Scene, mode: str = "sorted", rel: float = 1e-4, rel_z: float = 1e-6,
                     **kw) -> torch.Tensor:
    """Pixels [C,H,W] where float32 rounding may legitimately flip a discrete decision: a pair's
    α within `rel` (relative) of the 1/255 cut, or (sorted) a running transmittance within `rel`
    of the 1e-4 stop, or (sorted) two contributing Gaussians whose depths differ by less than
    rel_z·z but are not equal (their order may swap). Each flip changes a pixel by up to ~α·|c|,
    far above float32 rounding, so such pixels are compared only in float64 (where the two
    sides agree to ~1e-14 and no decision flips). From the float64 reference projection."""
    out = torch.zeros(scene.C, scene.height, scene.width, dtype=torch.bool)
    for c, y0, y1, A, raw, z in pair_alphas(scene, **kw):
        amb = ((raw * ref.ALPHA_MIN_INV - 1).abs() < rel).any(-1)
        if mode == "sorted" and A.shape[1]:
            T = torch.cumprod(1 - A, dim=-1)
            amb |= ((T / ref.TRANSMITTANCE_MIN - 1).abs() < rel).any(-1)
            dz = z[1:] - z[:-1]
            near = ((dz > 0) & (dz < rel_z * z[1:].abs())).nonzero().squeeze(1)
            if near.numel():
                amb |= ((A[:, near] > 0) & (A[:, near + 1] > 0)).any(-1)
        out[c, y0:y1] = amb.reshape(y1 - y0, -1)
    return out


@pytest.fixture
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.skip(f"shared data folder absent ({DATA})")
    return DATA


# ------------------------------------------------------------------- CPU kernels' ISA copies

# The CPU kernels are compiled for AVX-512F+VL, AVX2+FMA and baseline x86-64 (csrc/cpu/isa.h; a
# GSRENDER_CPU_ISA_BUILD=host build: the host's copy alone, =native: it and the baseline one); the suite runs on the
# active one (the best this CPU runs, or GSRENDER_CPU_ISA's). Tests marked @every_cpu_isa, a
# representative subset of the rasterizer / projection / SH / binning / weight_stats / contributors
# correctness tests, run once per copy the build has and this CPU runs (the active one first), so
# every copy built is checked on every machine.
every_cpu_isa = pytest.mark.usefixtures("cpu_isa")


def pytest_generate_tests(metafunc):
    if "cpu_isa" in metafunc.fixturenames:
        active = _C.cpu_isa()
        isas = [active] + [i for i in _C.cpu_isas() if i != active]
        metafunc.parametrize("cpu_isa", isas, indirect=True, ids=[f"isa={i}" for i in isas])


@pytest.fixture
def cpu_isa(request):
    """Runs the test on the CPU kernels' request.param copy, then restores the active one."""
    before = _C.cpu_isa()
    _C.set_cpu_isa(request.param)
    yield request.param
    _C.set_cpu_isa(before)
