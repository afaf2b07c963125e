"""Writes the standard kernel case set from the CPU backend:
``python -m gsrender.testing.make_cases OUT_DIR [--only SUBSTRING]``.

Every case holds one kernel's inputs and parameters and the CPU backend's outputs (the
expected values) with the comparison rules of its precision (gsrender.testing.check). The set:
projection and SH (forward + backward, SH degrees 0–3), binning (exact — conics and opacities
given — sorted / unsorted, two tile sizes; and the radii boxes' lists), the rasterize forward (scalar f32 and f64, Tensor Core f16 / bf16 / tf32; sorted and
weighted; RGB, RGB+D and D = 16, 40, 64, 130, 512 channels), the rasterize backward (scalar
f32, Tensor Core f16 / bf16, and the deterministic one), weight_stats and contributors, on a
tiny (24×20 px, 40 Gaussians) and a small (64×48 px, 2 cameras, 600 Gaussians) scene. Inputs
come from the CPU pipeline itself (projection → binning → forward), so they are the arrays the
kernels see in a real render. The CPU runs every matrix kernel as its fp32 GEMM: for the Tensor
Core kernels the expected output is that fp32 result and the tolerance is the operand
precision's.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gsrender import _C
from gsrender.cameras import intrinsics
from gsrender.contract import CAMERA_MODELS
from gsrender.testing.case import Case, write_case
from gsrender.testing.tile_lists import chunk_reach, list_stats

# Per-precision bars (gsrender.testing.check has the rule semantics). value: normalised max error
# (|out − expected| / max |expected|, per channel for render); a few pixels may differ by up to
# OUTLIER_TOL where the 3DGS early stop (T < 1e-4) flips on a last-bit difference of α (device
# __expf vs the CPU's exp) or of the transmittance product's order. grad: cosine similarity and
# norm ratio of each gradient array.
# Headroom of the correct kernels (the SIMT runtime over the whole standard set): render 8.2e-4
# (f16, tf32) and 7.3e-3 (bf16) against 3e-3 / 2e-2; gradients, whole arrays, worst 1 − cos
# 8.5e-6 / norm 3.7e-4 (f16) and 6.1e-4 / 3.9e-3 (bf16, v_opacities of the small scene, D = 4),
# f32 below 1e-12 / 3e-7 (its bars allow for nvcc's fast-math exp and FMA contraction on a GPU).
VALUE_TOL = {"f64": 1e-10, "f32": 1e-5, "tf32": 3e-3, "f16": 3e-3, "bf16": 2e-2}
GRAD_COS = {"f64": 1.0 - 1e-12, "f32": 0.99999, "tf32": 0.999, "f16": 0.9999, "bf16": 0.998}
GRAD_NORM = {"f64": 1e-10, "f32": 1e-4, "tf32": 1e-2, "f16": 3e-3, "bf16": 1e-2}
# Per channel and per group of Gaussians by list position (a lost channel batch, or Gaussians
# past the first chunk whose gradients are small next to the first chunk's, show there, not in a
# whole array). Headroom: worst 1 − cos 1.4e-5 / norm 4.2e-4 (f16), 2.8e-3 / 1.5e-2 (bf16: the
# later-chunk Gaussians' v_conics on the 256² scene, whose small gradients carry bf16's relative
# error), f32 2e-12 / 6e-7.
PART_COS = {"f64": 1.0 - 1e-12, "f32": 0.99999, "tf32": 0.999, "f16": 0.999, "bf16": 0.99}
PART_NORM = {"f64": 1e-10, "f32": 1e-4, "tf32": 1e-2, "f16": 3e-3, "bf16": 5e-2}
OUTLIER_FRAC = 0.002  # at most 0.2% of the elements past `tol` ...
OUTLIER_TOL = 3e-2  # ... and none past this (a flipped stop moves a pixel by ≤ T ≤ 1e-2)
# Weighted mode has no stop, but a Gaussian's α may land on the other side of the 1/255 cut in
# float32 and in the reference; such a pixel moves by about that Gaussian's share at α = 1/255.
# Measured: 10 render elements of 196,608 past 1e-5 (f32, the 256² scene), the worst 1.2e-4.
CUT_FLIP_FRAC = 1e-3
CUT_FLIP_TOL = 1e-3

# rasterize's precision argument per case precision
PRECISION_ARG = {"f16": "fp16", "f32": "fp32", "f64": "fp32", "bf16": "bf16", "tf32": "tf32"}
CHANNELS = (3, 4, 16, 40, 130)  # RGB, RGB + depth, features (64, 512: real_scale_cases)
WIDE_ON_SMALL = 16  # more channels than this run on the tiny scene only (keeps the set small)
EPS2D, NEAR, FAR = 0.3, 0.01, 1e10
WEIGHT_PARAMS = [0.3, 1.5, 0.05]  # weighted mode's sigma, beta, w_bg


@dataclass(frozen=True)
class SceneSpec:
    """A random scene: N 3D Gaussians in front of C cameras, world scales log-uniform in
    `scales`, opacities uniform in `opacity`. `crowd` > 1 crowds the Gaussians towards the left
    edge (x ∝ u^crowd), so tile lists run from long (left) to short (right); `faint` gives the
    right half of the image opacities in that range instead, so the left tiles saturate early and
    some right tiles never do."""
    width: int
    height: int
    cameras: int
    gaussians: int
    seed: int
    scales: tuple = (0.015, 0.25)
    opacity: tuple = (0.2, 0.99)
    crowd: float = 1.0
    faint: tuple | None = None


SCENES = {
    "tiny": SceneSpec(24, 20, 1, 40, 1),
    "small": SceneSpec(64, 48, 2, 600, 2),
    # real scale: lists of 300–3,000 entries (several chunks, partial last chunks), boxes of 1×1
    # to 16×16 tiles (t16; past 20×20 at t8), saturated and never-saturated tiles
    "crowd": SceneSpec(60, 44, 1, 5000, 3, scales=(0.02, 0.3), opacity=(0.5, 0.99), crowd=2.5,
                       faint=(0.01, 0.05)),
    "deep": SceneSpec(24, 16, 1, 640, 5, scales=(0.15, 0.5), opacity=(0.01, 0.1)),
    "large": SceneSpec(256, 256, 1, 20000, 4, scales=(0.003, 0.3), opacity=(0.05, 0.99),
                       crowd=1.5, faint=(0.01, 0.1)),
}


def _cpu_ops():
    return torch.ops.gsrender  # registered by gsrender._C (imported above): the CPU kernels


def _np(t) -> np.ndarray:
    return t.detach().cpu().contiguous().numpy()


def value_rule(precision: str, per_channel: bool = False, stop_flips: bool = False,
               cut_flips: bool = False) -> dict:
    """stop_flips: sorted mode's early stop may flip (OUTLIER_TOL); cut_flips: only a Gaussian's
    α may cross the 1/255 cut (CUT_FLIP_FRAC, CUT_FLIP_TOL)."""
    tol = VALUE_TOL[precision]
    rule = {"kind": "value", "tol": tol, "per_channel": per_channel}
    if stop_flips:
        rule.update(outliers=OUTLIER_FRAC, tol_max=max(OUTLIER_TOL, tol))
    elif cut_flips:
        rule.update(outliers=CUT_FLIP_FRAC, tol_max=max(CUT_FLIP_TOL, tol))
    return rule


def grad_rule(precision: str, channels: bool = False, groups: bool = False) -> dict:
    """channels: also per channel (the last axis); groups: also per group of Gaussians by list
    position (tile_lists.gaussian_groups; unlisted Gaussians must get exactly 0)."""
    rule = {"kind": "grad", "cos": GRAD_COS[precision], "norm": GRAD_NORM[precision]}
    part = {"cos": PART_COS[precision], "norm": PART_NORM[precision]}
    if channels:
        rule["channels"] = part
    if groups:
        rule["groups"] = part
    return rule


def exact_rule(mismatch: float = 0.0) -> dict:
    return {"kind": "exact", "max_mismatch": mismatch}


# ----------------------------------------------------------------------------------------------
# scenes


class Scene:
    """Random 3D Gaussians in front of 1–2 cameras, projected and binned by the CPU backend."""

    def __init__(self, name: str, dtype=torch.float32):
        spec = SCENES[name]
        W, H, C, N = spec.width, spec.height, spec.cameras, spec.gaussians
        g = torch.Generator().manual_seed(spec.seed)
        self.name, self.W, self.H, self.C, self.N, self.dtype = name, W, H, C, N, dtype
        u = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)
        z = 2.0 + 2.0 * u(N)
        xy = u(N, 2)
        xy[:, 0] = xy[:, 0] ** spec.crowd
        xy = (xy - 0.5) * torch.tensor([1.4 * W / H, 1.4]) * z[:, None] * 0.6
        self.means = torch.cat([xy, z[:, None]], 1)
        q = torch.randn(N, 4, generator=g, dtype=torch.float64)
        self.quats = q / q.norm(dim=1, keepdim=True)
        lo, hi = np.log(spec.scales[0]), np.log(spec.scales[1])
        self.scales = torch.exp(lo + (hi - lo) * u(N, 3))
        self.opacities = spec.opacity[0] + (spec.opacity[1] - spec.opacity[0]) * u(N)
        if spec.faint is not None:
            faint = spec.faint[0] + (spec.faint[1] - spec.faint[0]) * u(N)
            self.opacities = torch.where(xy[:, 0] > 0, faint, self.opacities)
        view = torch.eye(4, dtype=torch.float64).repeat(C, 1, 1)
        if C > 1:  # the second camera a little to the right, looking at the same volume
            view[1, 0, 3] = -0.3
        self.viewmats = view
        self.Ks = intrinsics(W, H, 60.0, dtype=torch.float64).repeat(C, 1, 1)
        for k in ("means", "quats", "scales", "opacities", "viewmats", "Ks"):
            setattr(self, k, getattr(self, k).to(dtype))
        self.gen = g
        ops = _cpu_ops()
        self.radii, self.means2d, self.depths, self.conics, self.opac2d = ops.project_fwd(
            self.means, self.quats, self.scales, self.opacities, self.viewmats, self.Ks, W, H,
            EPS2D, NEAR, FAR, 0.0, False)

    def binning(self, tile_size: int = 16, sort: bool = True, exact: bool = True):
        """The pipeline's tile lists: exact (the support ellipse meets the tile) unless asked for
        the radii boxes' lists."""
        extra = (self.conics, self.opac2d) if exact else ()
        return _cpu_ops().bin_tiles(self.means2d, self.radii, self.depths, self.W, self.H,
                                    tile_size, sort, *extra)

    def channels(self, D: int) -> torch.Tensor:
        """[C, N, D]: RGB in [0, 1]; D = 4 adds the depth (≈ 2–4, another range); more channels
        are features whose magnitudes span 1e-2..1e2 across channels (the per-channel operand
        scaling's job)."""
        g = torch.Generator().manual_seed(1000 + D)
        rgb = torch.rand(self.N, 3, generator=g, dtype=torch.float64)
        if D == 3:
            cols = rgb.expand(self.C, -1, -1)
        elif D == 4:
            cols = torch.cat([rgb.expand(self.C, -1, -1), self.depths[..., None].double()], -1)
        else:
            mag = 10.0 ** (4.0 * torch.rand(D, generator=g, dtype=torch.float64) - 2.0)
            cols = (torch.randn(self.N, D, generator=g, dtype=torch.float64) * mag)
            cols = cols.expand(self.C, -1, -1)
        return cols.contiguous().to(self.dtype)


def _raster_inputs(s: Scene, colors, backgrounds, tile_offsets, flatten_ids) -> dict:
    d = {"means2d": s.means2d, "conics": s.conics, "opacities": s.opac2d, "depths": s.depths,
         "tile_offsets": tile_offsets, "flatten_ids": flatten_ids}
    if colors is not None:  # weight_stats and contributors read no colours
        d["colors"] = colors
    if backgrounds is not None:
        d["backgrounds"] = backgrounds
    return {k: _np(v) for k, v in d.items()}


def _raster_params(s: Scene, tile_size: int, mode: int, prec: str, backward: bool = False,
                   deterministic: bool = False) -> dict:
    """raster_kernel: the kernel rasterize_fwd's launch plan runs for this case on a CUDA sm_80
    device (the driver runs exactly that one; gsrender/raster_plan.h)."""
    plan = _C.plan_raster(PRECISION_ARG[prec], mode == 0, deterministic, True, prec != "f64",
                         tile_size, 8)
    return {"width": s.W, "height": s.H, "tile_size": tile_size, "mode": mode,
            "weight_params": WEIGHT_PARAMS if mode == 1 else [],
            "raster_kernel": _C.raster_kernels()[plan[1 if backward else 0]]}


# ----------------------------------------------------------------------------------------------
# the cases, kernel by kernel


# (antialiased, camera model) of the projection cases; other lenses carry "camera_model" (the op's
# value) in their params
PROJECTION_VARIANTS = ((False, "pinhole"), (True, "pinhole"), (True, "ortho"), (True, "fisheye"))


def projection_cases(s: Scene):
    ops = _cpu_ops()
    for aa, lens in PROJECTION_VARIANTS:
        model = CAMERA_MODELS.index(lens)
        params = {"width": s.W, "height": s.H, "eps2d": EPS2D, "near_plane": NEAR,
                  "far_plane": FAR, "radius_clip": 0.0, "antialiased": aa}
        if model:
            params["camera_model"] = model
        inputs = {k: _np(getattr(s, k)) for k in
                  ("means", "quats", "scales", "opacities", "viewmats", "Ks")}
        out = ops.project_fwd(s.means, s.quats, s.scales, s.opacities, s.viewmats, s.Ks, s.W,
                              s.H, EPS2D, NEAR, FAR, 0.0, aa, model)
        names = ("radii", "means2d", "depths", "conics", "opacities2d")
        tag = ("_aa" if aa else "") + ("" if lens == "pinhole" else f"_{lens}")
        yield Case(f"project_fwd_{s.name}{tag}", "project_fwd", "f32", params,
                   {"inputs": inputs, "expected": {n: _np(t) for n, t in zip(names, out)}},
                   {n: exact_rule() if n == "radii" else value_rule("f32") for n in names})
        # backward: random upstream gradients on the visible Gaussians
        g = torch.Generator().manual_seed(77)
        v = {n: torch.randn(t.shape, generator=g, dtype=s.dtype)
             for n, t in zip(names[1:], out[1:])}
        grads = ops.project_bwd(s.means, s.quats, s.scales, s.opacities, s.viewmats, s.Ks, s.W,
                                s.H, EPS2D, aa, out[0], v["means2d"], v["depths"], v["conics"],
                                v["opacities2d"], model)
        bwd_in = dict(inputs, radii=_np(out[0]), **{f"v_{n}": _np(t) for n, t in v.items()})
        gnames = ("v_means", "v_quats", "v_scales", "v_opacities", "v_viewmats")
        bparams = {k: params[k] for k in ("width", "height", "eps2d", "antialiased",
                                           "camera_model") if k in params}
        yield Case(f"project_bwd_{s.name}{tag}", "project_bwd", "f32", bparams,
                   {"inputs": bwd_in, "expected": {n: _np(t) for n, t in zip(gnames, grads)}},
                   {n: grad_rule("f32") for n in gnames})


def sh_cases(s: Scene):
    ops = _cpu_ops()
    g = torch.Generator().manual_seed(5)
    K = 16
    coeffs = torch.randn(s.N, K, 3, generator=g, dtype=s.dtype)
    dirs = torch.randn(s.C, s.N, 3, generator=g, dtype=s.dtype)
    v_colors = torch.randn(s.C, s.N, 3, generator=g, dtype=s.dtype)
    for deg in range(4):
        colors = ops.sh_fwd(deg, dirs, coeffs)
        yield Case(f"sh_fwd_{s.name}_deg{deg}", "sh_fwd", "f32", {"degree": deg},
                   {"inputs": {"dirs": _np(dirs), "coeffs": _np(coeffs)},
                    "expected": {"colors": _np(colors)}}, {"colors": value_rule("f32")})
        v_dirs, v_coeffs = ops.sh_bwd(deg, dirs, coeffs, v_colors)
        yield Case(f"sh_bwd_{s.name}_deg{deg}", "sh_bwd", "f32", {"degree": deg},
                   {"inputs": {"dirs": _np(dirs), "coeffs": _np(coeffs),
                               "v_colors": _np(v_colors)},
                    "expected": {"v_dirs": _np(v_dirs), "v_coeffs": _np(v_coeffs)}},
                   {"v_dirs": grad_rule("f32"), "v_coeffs": grad_rule("f32")})


ALL_BINNINGS = [(ts, sort, True) for ts in (16, 8) for sort in (True, False)] + [(16, True, False)]


def binning_cases(s: Scene, variants=ALL_BINNINGS):
    """Exact binning (conics and opacities given, what the pipeline runs) for both tile sizes and
    orders; the radii boxes' lists (no conics) once per scene. variants: (tile size, sorted,
    exact) triples."""
    for ts, sort, exact in variants:
        offsets, ids = s.binning(ts, sort, exact)
        inputs = {"means2d": _np(s.means2d), "radii": _np(s.radii), "depths": _np(s.depths)}
        if exact:
            inputs.update(conics=_np(s.conics), opacities=_np(s.opac2d))
        yield Case(f"bin_tiles_{s.name}_t{ts}_{'sorted' if sort else 'unsorted'}_"
                   f"{'exact' if exact else 'box'}", "bin_tiles", "f32",
                   {"width": s.W, "height": s.H, "tile_size": ts, "sort": sort, "exact": exact},
                   {"inputs": inputs,
                    "expected": {"tile_offsets": _np(offsets), "flatten_ids": _np(ids)}},
                   {"tile_offsets": exact_rule(), "flatten_ids": exact_rule()})


def _forward(s: Scene, colors, bg, offsets, ids, mode):
    """The CPU reference with a deterministic backward planned: precision fp32 is its exact
    scalar loop (sorted mode; weighted mode runs its fp32 GEMM)."""
    return _cpu_ops().rasterize_fwd(s.means2d, s.conics, s.opac2d, colors, s.depths, bg, offsets,
                                    ids, s.W, s.H, 16, mode,
                                    WEIGHT_PARAMS if mode == 1 else [], "fp32", True)


def _background(s: Scene, D: int, colors):
    if D not in (3, 40):  # backgrounds on two channel counts: both paths stay covered
        return None
    g = torch.Generator().manual_seed(D)
    return (torch.rand(s.C, D, generator=g, dtype=torch.float64) *
            colors.abs().amax((0, 1)).double()).to(s.dtype)


def rasterize_fwd_cases(s: Scene, precisions=("f32", "f16", "bf16", "tf32"), channels=CHANNELS,
                        combos=None):
    """combos: the (precision, mode) pairs to write (default: every one)."""
    for mode, mname in ((0, "sorted"), (1, "weighted")):
        offsets, ids = s.binning(16, mode == 0)
        for D in channels:
            colors = s.channels(D)
            bg = _background(s, D, colors)
            render, alphas, last_ids, aux, *_ = _forward(s, colors, bg, offsets, ids, mode)
            expected = {"render": _np(render), "alphas": _np(alphas), "last_ids": _np(last_ids),
                        "aux": _np(aux)}
            for prec in precisions:
                if combos is not None and (prec, mode) not in combos:
                    continue
                # α, T and the stop are fp32 in every kernel; only OUT's operands are rounded
                f32 = "f64" if prec == "f64" else "f32"
                flips = {"stop_flips": mode == 0, "cut_flips": mode == 1}
                compare = {"render": value_rule(prec, per_channel=True, **flips),
                           "alphas": value_rule(f32, **flips),
                           "aux": value_rule(f32, **flips),
                           "last_ids": exact_rule(OUTLIER_FRAC)}
                if prec != "f32" and prec != "f64":  # the quad scan's product order
                    for k in ("alphas", "aux"):
                        compare[k]["tol"] = 1e-4
                yield Case(f"rasterize_fwd_{s.name}_{mname}_D{D}_{prec}", "rasterize_fwd", prec,
                           _raster_params(s, 16, mode, prec),
                           {"inputs": _raster_inputs(s, colors, bg, offsets, ids),
                            "expected": expected}, compare)


def rasterize_bwd_cases(s: Scene, channels=(3, 4, 16, 40, 130), det_channels=(3, 40),
                        combos=None):
    """combos: the (precision, mode) pairs to write (default: every one); the deterministic
    backward runs on det_channels."""
    ops = _cpu_ops()
    gnames = ("v_means2d", "v_conics", "v_opacities", "v_colors", "v_depths", "v_backgrounds")
    for mode, mname in ((0, "sorted"), (1, "weighted")):
        offsets, ids = s.binning(16, mode == 0)
        for D in channels:
            colors = s.channels(D)
            bg = _background(s, D, colors)
            render, alphas, last_ids, aux, _, plan = _forward(s, colors, bg, offsets, ids, mode)
            g = torch.Generator().manual_seed(300 + D)
            v_render = torch.randn(render.shape, generator=g, dtype=s.dtype)
            v_alphas = torch.randn(alphas.shape, generator=g, dtype=s.dtype)
            grads = ops.rasterize_bwd(s.means2d, s.conics, s.opac2d, colors, s.depths, bg,
                                      offsets, ids, s.W, s.H, 16, mode,
                                      WEIGHT_PARAMS if mode == 1 else [], render, alphas,
                                      last_ids, aux, v_render, v_alphas, plan)
            inputs = _raster_inputs(s, colors, bg, offsets, ids)
            inputs.update(render=_np(render), alphas=_np(alphas), last_ids=_np(last_ids),
                          aux=_np(aux), v_render=_np(v_render), v_alphas=_np(v_alphas))
            expected = {n: _np(t) for n, t in zip(gnames, grads)}
            variants = [("f32", False), ("f16", False), ("bf16", False)]
            if D in det_channels:
                variants.append(("f32", True))
            for prec, det in variants:
                if combos is not None and not det and (prec, mode) not in combos:
                    continue
                params = _raster_params(s, 16, mode, prec, backward=True, deterministic=det)
                tag = "det" if det else prec
                yield Case(f"rasterize_bwd_{s.name}_{mname}_D{D}_{tag}", "rasterize_bwd", prec,
                           params, {"inputs": inputs, "expected": expected},
                           {n: grad_rule(prec, channels=n in ("v_colors", "v_backgrounds"),
                                         groups=n != "v_backgrounds") for n in gnames})


def weight_stats_cases(s: Scene):
    offsets, ids = s.binning(16, True)
    for tau_s, K in ((0.1, 4), (0.02, 16)):
        out = _cpu_ops().weight_stats(s.means2d, s.conics, s.opac2d, s.depths, offsets, ids, s.W,
                                      s.H, 16, tau_s, K)
        names = ("w_sum", "w_max", "n_views", "topk_ids", "topk_weights")
        yield Case(f"weight_stats_{s.name}_K{K}", "weight_stats", "f32",
                   {"width": s.W, "height": s.H, "tile_size": 16, "tau_s": tau_s, "top_k": K},
                   {"inputs": _raster_inputs(s, None, None, offsets, ids),
                    "expected": {n: _np(t) for n, t in zip(names, out)}},
                   {"w_sum": value_rule("f32", stop_flips=True),
                    "w_max": value_rule("f32", stop_flips=True),
                    # a weight within rounding of tau_s, or two near-equal weights, may differ
                    "n_views": exact_rule(OUTLIER_FRAC), "topk_ids": exact_rule(OUTLIER_FRAC),
                    "topk_weights": value_rule("f32", stop_flips=True)})


def contributors_cases(s: Scene):
    offsets, ids = s.binning(16, True)
    g = torch.Generator().manual_seed(9)
    n_pix = min(50, s.W * s.H)
    pix = torch.stack([torch.randint(0, s.W, (s.C, n_pix), generator=g),
                       torch.randint(0, s.H, (s.C, n_pix), generator=g)], -1).to(torch.int32)
    pix[:, -3:] = -1  # padding entries
    names = ("ids", "weights", "zs", "clusters", "counts", "n_render")
    # every pixel on the tiny scene, a pixel list (with padding) on both
    variants = [("list", pix, 8)] + ([("all", None, 32)] if s.name.startswith("tiny") else [])
    for tag, pixels, K in variants:
        out = _cpu_ops().contributors(s.means2d, s.conics, s.opac2d, s.depths, offsets, ids, s.W,
                                      s.H, 16, pixels, K, 0.03, 0.0)
        inputs = _raster_inputs(s, None, None, offsets, ids)
        if pixels is not None:
            inputs["pixels"] = _np(pixels)
        compare = {n: exact_rule(OUTLIER_FRAC) for n in ("ids", "clusters", "counts", "n_render")}
        # a list that shifts by one entry (a flipped threshold) moves its later weights and depths
        compare.update(weights=value_rule("f32", stop_flips=True),
                       zs=value_rule("f32", stop_flips=True))
        yield Case(f"contributors_{s.name}_{tag}", "contributors", "f32",
                   {"width": s.W, "height": s.H, "tile_size": 16, "K_max": K, "tau_rel": 0.03,
                    "tau_abs": 0.0},
                   {"inputs": inputs, "expected": {n: _np(t) for n, t in zip(names, out)}},
                   compare)


def standard_cases():
    """Yields the standard set (in a fixed order)."""
    for name in ("tiny", "small"):
        s = Scene(name)
        narrow = tuple(D for D in CHANNELS if D <= WIDE_ON_SMALL)
        yield from projection_cases(s)
        yield from sh_cases(s)
        yield from binning_cases(s)
        yield from rasterize_fwd_cases(s, channels=CHANNELS if name == "tiny" else narrow)
        yield from rasterize_bwd_cases(s, channels=(3, 4, 16, 40, 130) if name == "tiny" else
                                       (3, 4, 16))
        yield from weight_stats_cases(s)
        yield from contributors_cases(s)
    # float64: the scalar kernels' double instantiation, forward and deterministic backward
    s = Scene("tiny", dtype=torch.float64)
    s.name = "tiny64"
    yield from rasterize_fwd_cases(s, precisions=("f64",), channels=(3, 40))
    yield from real_scale_cases()


# each precision once, the modes alternating: the wider channel counts and the 256² scene, whose
# arrays would otherwise take most of the set's size
EACH_PRECISION_FWD = {("f32", 1), ("f16", 0), ("bf16", 1), ("tf32", 0)}
EACH_PRECISION_BWD = {("f32", 0), ("f16", 1), ("bf16", 0)}


def real_scale_cases():
    """Lists of several chunks (tile_lists): every precision and mode for D = 1 and 3 on the
    crowded scene (partial edge tiles, lists of 400–2,100 entries), each precision once for
    D = 13; D = 64 and 512 on the deep one (few Gaussians, nearly each in every list: its colour
    arrays stay small); RGB on the 256² one (20k Gaussians, boxes up to 26 × 26 tiles at t8,
    tiles that saturate in their first chunk and tiles that never do)."""
    s = Scene("crowd")
    yield from binning_cases(s, [(16, True, True), (8, False, True), (16, True, False)])
    yield from rasterize_fwd_cases(s, channels=(1, 3))
    yield from rasterize_fwd_cases(s, channels=(13,), combos=EACH_PRECISION_FWD)
    yield from rasterize_bwd_cases(s, channels=(1,), det_channels=(1,))
    yield from rasterize_bwd_cases(s, channels=(13,), det_channels=(), combos=EACH_PRECISION_BWD)
    yield from weight_stats_cases(s)
    yield from contributors_cases(s)
    s = Scene("deep")
    yield from rasterize_fwd_cases(s, channels=(64,))
    yield from rasterize_bwd_cases(s, channels=(64,), det_channels=(), combos=EACH_PRECISION_BWD)
    yield from rasterize_fwd_cases(s, channels=(512,), combos=EACH_PRECISION_FWD)
    yield from rasterize_bwd_cases(s, channels=(512,), det_channels=(),
                                   combos={("f32", 1), ("bf16", 0)})
    s = Scene("large")
    yield from binning_cases(s, [(16, True, True), (8, False, True)])
    yield from rasterize_fwd_cases(s, channels=(3,), combos={("f32", 1), ("f16", 0), ("bf16", 1)})
    yield from rasterize_bwd_cases(s, channels=(3,), det_channels=(), combos={("bf16", 0)})


def _list_report(case: Case) -> str:
    """The case's tile lists (tile_lists.list_stats) when it has binning's arrays, and for a
    sorted forward how many multi-chunk tiles end within their first chunk (every pixel's last
    entry there) and how many run to their last chunk."""
    arrays = case.arrays["inputs"] if "tile_offsets" in case.arrays["inputs"] else \
        case.arrays["expected"]
    if "tile_offsets" not in arrays:
        return ""
    offsets, ids = arrays["tile_offsets"], arrays["flatten_ids"]
    text = str(list_stats(offsets, ids.size))
    last = case.arrays["expected"].get("last_ids")
    if last is not None and case.params.get("mode") == 0 and case.params["tile_size"] == 16:
        first, to_end = chunk_reach(offsets, ids.size, last)
        text += f", {first} end in chunk 1, {to_end} reach their last chunk"
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gsrender.testing.make_cases",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", help="folder for the case folders (replaced cases are rewritten)")
    ap.add_argument("--only", default="", help="only cases whose name contains this")
    ap.add_argument("--clean", action="store_true", help="delete out_dir first")
    args = ap.parse_args(argv)
    out = Path(args.out_dir)
    if args.clean and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    t0, n, kernels = time.time(), 0, {}
    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    for case in standard_cases():
        if args.only and args.only not in case.name:
            continue
        write_case(case, out / case.name)
        report = _list_report(case)
        if report:
            print(f"{case.name}: {report}")
        n += 1
        kernels[case.kernel] = kernels.get(case.kernel, 0) + 1
    if not args.only:  # tools/gpu_check.sh: the set is whole
        (out / ".complete").write_text(f"{n}\n")
    summary = ", ".join(f"{k} {v}" for k, v in kernels.items())
    print(f"wrote {n} cases to {out} in {time.time() - t0:.1f} s ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
