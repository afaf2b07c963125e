"""The Tensor Core rasterizer's lane bookkeeping, proven on the CPU (docs/design.md §5.4).

csrc/cpu/mma_emulation.cpp runs the kernel's own lane functions (gsrender/mma_fragments.h) on an
emulated warp: 32 lanes in lockstep, CUDA shuffle semantics, mma.m16n8k16 and ldmatrix.x2.trans
emulated from the PTX fragment layouts. Here: the layouts against the PTX ISA tables (written out
independently below), the emulated MMA against A·B + C, the host f16/bf16 rounding against torch,
and whole tiles rendered by the emulated warps against the float64 reference.
"""
from __future__ import annotations

import math

import pytest
import torch

from gsrender import _C  # noqa: F401  (registers torch.ops.gsrender.*)
from gsrender import reference as ref

OPS = torch.ops.gsrender
F32, F64 = torch.float32, torch.float64
PREC = {"f32": 0, "f16": 1, "bf16": 2}


# ----------------------------------------------------------------------- the PTX ISA tables


def _ptx_a(lane: int, i: int) -> tuple[int, int]:
    """mma.m16n8k16 .f16/.bf16 A element a_i: (row, col)."""
    group, tig = lane >> 2, lane % 4
    row = group if i in (0, 1, 4, 5) else group + 8
    col = tig * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


def _ptx_b(lane: int, i: int) -> tuple[int, int]:
    """B element b_i: (row k, col n)."""
    group, tig = lane >> 2, lane % 4
    return tig * 2 + (i & 1) + (8 if i >= 2 else 0), group


def _ptx_c(lane: int, i: int) -> tuple[int, int]:
    """C/D element c_i (f32): (row, col)."""
    group, tig = lane >> 2, lane % 4
    return (group if i < 2 else group + 8), tig * 2 + (i & 1)


@pytest.fixture(scope="module")
def maps():
    names = ("a", "b", "c", "ldm", "sub", "cols", "pix")
    return dict(zip(names, OPS.mma_fragment_maps(), strict=True))


@pytest.mark.parametrize("name,table,n_elem,shape", [
    ("a", _ptx_a, 8, (16, 16)), ("b", _ptx_b, 4, (16, 8)), ("c", _ptx_c, 4, (16, 8))])
def test_fragment_map_is_the_ptx_layout_and_a_bijection(maps, name, table, n_elem, shape):
    m = maps[name]
    assert m.shape == (32, n_elem, 2)
    owners = torch.zeros(shape, dtype=torch.int64)
    for lane in range(32):
        for i in range(n_elem):
            r, col = (int(v) for v in m[lane, i])
            assert (r, col) == table(lane, i), (name, lane, i)
            owners[r, col] += 1
    assert (owners == 1).all(), f"{name}: every element owned by exactly one (lane, register)"


def test_a_registers_pack_consecutive_columns(maps):
    # register r holds elements 2r (low half) and 2r+1 (high): same row, columns c and c+1
    a = maps["a"]
    assert (a[:, 0::2, 0] == a[:, 1::2, 0]).all()
    assert (a[:, 1::2, 1] == a[:, 0::2, 1] + 1).all()


def test_subtile_rows_cover_the_8x4_subtile_once(maps):
    sub = maps["sub"]  # [2 blocks, 16 rows, (px, py)]
    p = sub[..., 1] * 8 + sub[..., 0]
    assert sorted(p.flatten().tolist()) == list(range(32))
    assert (p == torch.arange(32).reshape(2, 16)).all(), "m16 row r of block b is pixel 16b + r"


def test_lane_pixels_and_columns_follow_the_fragments(maps):
    a, c, pix, cols, sub = maps["a"], maps["c"], maps["pix"], maps["cols"], maps["sub"]
    for lane in range(32):
        for blk in range(2):
            for h in range(2):
                # the C elements with i>>1 == h are this pixel's channels
                for i in (2 * h, 2 * h + 1):
                    assert (sub[blk, int(c[lane, i, 0])] == pix[lane, blk, h]).all()
                # the A elements of row half h are this pixel's Gaussians, in column order j
                elems = [2 * h + (j & 1) + 4 * (j >> 1) for j in range(4)]
                assert (a[lane, elems, 1] == cols[lane]).all()
                assert (sub[blk, int(a[lane, elems[0], 0])] == pix[lane, blk, h]).all()
    # a quad (4 lanes) owns whole rows: all 16 Gaussian columns of its 2 pixels per block
    for g in range(8):
        assert sorted(cols[4 * g:4 * g + 4].flatten().tolist()) == list(range(16))


def test_ldmatrix_rows(maps):
    assert maps["ldm"][:16].tolist() == list(range(16))


# ----------------------------------------------------------------------- MMA and rounding


@pytest.mark.parametrize("prec", ["f32", "f16", "bf16"])
def test_emulated_mma_is_a_times_b_plus_c(prec):
    g = torch.Generator().manual_seed(1)
    A, B, C = (torch.randn(s, generator=g) for s in ((16, 16), (16, 8), (16, 8)))
    D = OPS.emulate_mma(A, B, C, PREC[prec])
    if prec == "f32":
        exp = A.double() @ B.double() + C.double()
    else:
        dt = torch.float16 if prec == "f16" else torch.bfloat16
        exp = A.to(dt).double() @ B.to(dt).double() + C.double()
    torch.testing.assert_close(D.double(), exp, rtol=1e-6, atol=1e-5)
    # and the layout really moves elements: a single 1 lands where A·B says
    A1 = torch.zeros(16, 16)
    A1[5, 11] = 1
    B1 = torch.arange(128, dtype=F32).reshape(16, 8)
    D1 = OPS.emulate_mma(A1, B1, torch.zeros(16, 8), PREC[prec])
    exp1 = torch.zeros(16, 8)
    exp1[5] = B1[11]
    assert torch.equal(D1, exp1)


@pytest.mark.parametrize("prec,dt", [("f16", torch.float16), ("bf16", torch.bfloat16)])
def test_host_rounding_matches_torch(prec, dt):
    g = torch.Generator().manual_seed(2)
    x = torch.cat([
        torch.randn(20000, generator=g) * torch.exp(torch.randn(20000, generator=g) * 6),
        torch.tensor([0.0, -0.0, 1.0, 65504.0, 65519.0, 65520.0, 1e6, -1e6, 2.0 ** -24,
                      2.0 ** -25, 1.5 * 2.0 ** -25, 2.0 ** -14, 3 * 2.0 ** -25, 1 + 2.0 ** -11,
                      1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, math.inf, -math.inf]),
        # exact ties of the half grid
        (torch.arange(1, 2000, dtype=F64) * 2.0 ** -11 + 0.5 * 2.0 ** -11 + 1).float(),
    ])
    got = OPS.emulate_round(x, PREC[prec])
    exp = x.to(dt).float()
    assert torch.equal(got, exp)
    assert torch.isnan(OPS.emulate_round(torch.tensor([math.nan]), PREC[prec])).all()


# ----------------------------------------------------------------------- tiles vs reference

W_IMG, H_IMG, TS = 40, 36, 16


def _tile_scene(seed: int, G: int, opacity: tuple[float, float], CH: int, tile=(1, 1)):
    """Random Gaussians around one tile, in list (depth) order; float32 values."""
    g = torch.Generator().manual_seed(seed)
    cx, cy = (tile[0] + 0.5) * TS, (tile[1] + 0.5) * TS
    means = torch.stack([cx + (torch.rand(G, generator=g, dtype=F64) - 0.5) * 1.6 * TS,
                         cy + (torch.rand(G, generator=g, dtype=F64) - 0.5) * 1.6 * TS], -1)
    th = torch.rand(G, generator=g, dtype=F64) * math.pi
    s = 0.8 + torch.rand(G, 2, generator=g, dtype=F64) * 5.0
    R = torch.stack([torch.cos(th), -torch.sin(th), torch.sin(th), torch.cos(th)], -1).reshape(G, 2, 2)
    cov = R @ torch.diag_embed(s * s) @ R.transpose(-1, -2)
    inv = torch.linalg.inv(cov)
    conics = torch.stack([inv[:, 0, 0], inv[:, 0, 1], inv[:, 1, 1]], -1)
    lo, hi = opacity
    opac = lo + (hi - lo) * torch.rand(G, generator=g, dtype=F64)
    feats = torch.rand(G, CH, generator=g, dtype=F64) if CH == 3 else \
        torch.randn(G, CH, generator=g, dtype=F64)
    bg = torch.rand(CH, generator=g, dtype=F64)
    # the kernel's inputs are float32: the reference sees exactly the same (rounded) values
    return [t.float() for t in (means, conics, opac, feats, bg)]


def _reference_tile(means, conics, opac, feats, bg, tile):
    """float64 reference over the whole image, cut to the tile: render [P,CH], T [P], last [P],
    the pixels where float32 may legitimately flip a discrete decision, the tile's in-image size
    and the pixels where the early stop fired."""
    G = means.shape[0]
    args = [t.double()[None] for t in (means, conics, opac)]
    depths = torch.arange(G, dtype=F64)[None] + 1.0  # list order = depth order
    img, alpha = ref.rasterize(args[0], args[1], args[2], feats.double()[None], depths,
                               W_IMG, H_IMG, backgrounds=bg.double()[None])
    wts = ref.blend_weights(args[0], args[1], args[2], depths, W_IMG, H_IMG)["weights"][0]
    idx = torch.arange(1, G + 1, dtype=F64)
    last = torch.where(wts > 0, idx, torch.zeros_like(idx)).amax(-1).long()  # [H,W]
    # ambiguity: α within 1e-4 (relative) of 1/255, or a running T within 1e-4 of the stop
    pix = ref._pixel_centers(W_IMG, H_IMG, args[0])
    d = args[0][0][None] - pix[:, None]
    a, b, c = args[1][0].unbind(-1)
    sigma = 0.5 * (a * d[..., 0] ** 2 + c * d[..., 1] ** 2) + b * d[..., 0] * d[..., 1]
    raw = args[2][0] * torch.exp(-sigma)
    A = ref._pair_alphas(pix, args[0][0], args[1][0], args[2][0])
    T = torch.cumprod(1 - A, -1)
    amb = ((raw * ref.ALPHA_MIN_INV - 1).abs() < 1e-4).any(-1) | ((T / ref.TRANSMITTANCE_MIN - 1).abs() < 1e-4).any(-1)
    x0, y0 = tile[0] * TS, tile[1] * TS
    x1, y1 = min(x0 + TS, W_IMG), min(y0 + TS, H_IMG)

    def cut(t):  # [H,W,...] → [TS*TS,...] with out-of-image pixels left at a fill
        return t[y0:y1, x0:x1]

    stopped = (T[:, -1] < ref.TRANSMITTANCE_MIN).reshape(H_IMG, W_IMG)  # the early stop fired
    return (cut(img[0]), cut(1 - alpha[0, ..., 0]), cut(last), cut(amb.reshape(H_IMG, W_IMG)),
            (y1 - y0, x1 - x0), cut(stopped))


def _emulate(means, conics, opac, feats, bg, tile, prec):
    out, T, last = OPS.emulate_mma_tile(means, conics, opac, feats, tile[0], tile[1], TS,
                                        W_IMG, H_IMG, bg, PREC[prec])
    CH = feats.shape[1]
    return (out.reshape(TS, TS, CH).double(), T.reshape(TS, TS).double(),
            last.reshape(TS, TS).long())


def _psnr(x, y):
    return -10 * math.log10(float(((x - y) ** 2).mean()))


CASES = [  # (seed, G, opacity range, tile): dense + opaque → most pixels stop early
    (10, 160, (0.5, 0.99), (1, 1)),
    (11, 70, (0.02, 0.4), (1, 1)),
    (12, 120, (0.3, 0.99), (2, 2)),  # partial tile at the image corner (partial sub-tiles)
]


@pytest.mark.parametrize("case", CASES, ids=["stop", "nostop", "edge"])
@pytest.mark.parametrize("CH", [3, 8, 13, 64])
def test_emulated_warp_f32_operands_match_reference(case, CH):
    seed, G, opac_range, tile = case
    scene = _tile_scene(seed + CH, G, opac_range, CH, tile)
    r_img, r_T, r_last, amb, (h, w), stopped = _reference_tile(*scene, tile)
    e_img, e_T_full, e_last = _emulate(*scene, tile, "f32")
    e_img, e_T, e_last = e_img[:h, :w], e_T_full[:h, :w], e_last[:h, :w]
    ok = ~amb
    assert amb.sum() <= 3, "too many ambiguous pixels for a meaningful test"
    assert (e_img[ok] - r_img[ok]).abs().max() <= 1e-5
    assert (e_T[ok] - r_T[ok]).abs().max() <= 1e-6
    assert torch.equal(e_last[ok], r_last[ok])
    if case[2][0] >= 0.3:  # the opaque cases really exercise the early stop
        assert stopped.float().mean() > 0.1
    else:
        assert not stopped.any()
    # pixels outside the image are untouched
    assert (e_T_full[h:, :] == 1).all() and (e_T_full[:, w:] == 1).all()


@pytest.mark.parametrize("case", CASES, ids=["stop", "nostop", "edge"])
@pytest.mark.parametrize("CH", [3, 13, 64])
def test_emulated_warp_f16_operands_meet_the_fp16_bars(case, CH):
    seed, G, opac_range, tile = case
    scene = _tile_scene(seed + CH, G, opac_range, CH, tile)
    r_img, r_T, r_last, amb, (h, w), _ = _reference_tile(*scene, tile)
    e_img, e_T, e_last = _emulate(*scene, tile, "f16")
    e_img, e_T, e_last = e_img[:h, :w][~amb], e_T[:h, :w][~amb], e_last[:h, :w][~amb]
    r_img, r_T, r_last = r_img[~amb], r_T[~amb], r_last[~amb]
    # transmittance and the stop are computed in f32: unchanged by the operand precision
    assert (e_T - r_T).abs().max() <= 1e-6
    assert torch.equal(e_last, r_last)
    if CH == 3:
        assert _psnr(e_img, r_img) >= 50
    else:
        cos = torch.nn.functional.cosine_similarity(e_img, r_img, dim=-1)
        assert cos.min() >= 0.9999, float(cos.min())


def test_emulated_warp_bf16_operands():
    scene = _tile_scene(7, 140, (0.3, 0.99), 3)
    r_img, _, _, amb, _, _ = _reference_tile(*scene, (1, 1))
    e_img, _, _ = _emulate(*scene, (1, 1), "bf16")
    psnr = _psnr(e_img[~amb], r_img[~amb])
    assert psnr >= 40  # 8-bit mantissa: bf16 trades W precision for range


@pytest.mark.parametrize("prec", ["f32", "f16"])
@pytest.mark.parametrize("tile", [(1, 1), (2, 2)], ids=["full", "edge"])
def test_emulated_warp_weighted_mode_matches_reference(prec, tile):
    # the sort-free mode: W = α·φ(z) per lane, Σw and Π(1 − α) reduced over the quad
    # (mma::row_weights_weighted), OUT = (W·F + w_bg·bg) / (Σw + w_bg)
    sigma_w, beta, w_bg = 0.05, 1.0, 1e-3
    means, conics, opac, feats, bg = _tile_scene(21, 120, (0.3, 0.99), 13, tile)
    G = means.shape[0]
    depths = torch.arange(G, dtype=F64) * 0.37 + 1.0
    phi = torch.exp(-sigma_w * depths ** beta).float()
    img, alpha = ref.rasterize(means.double()[None], conics.double()[None], opac.double()[None],
                               feats.double()[None], depths[None], W_IMG, H_IMG,
                               backgrounds=bg.double()[None], mode="weighted",
                               weight_params=(sigma_w, beta, w_bg))
    out, T, _ = OPS.emulate_mma_tile(means, conics, opac, feats, tile[0], tile[1], TS, W_IMG, H_IMG,
                                     bg, PREC[prec], phi, w_bg)
    x0, y0 = tile[0] * TS, tile[1] * TS
    x1, y1 = min(x0 + TS, W_IMG), min(y0 + TS, H_IMG)
    e_img = out.reshape(TS, TS, -1)[: y1 - y0, : x1 - x0].double()
    e_T = T.reshape(TS, TS)[: y1 - y0, : x1 - x0].double()
    r_img, r_T = img[0, y0:y1, x0:x1], 1 - alpha[0, y0:y1, x0:x1, 0]
    assert (e_T - r_T).abs().max() <= 1e-5
    cos = torch.nn.functional.cosine_similarity(e_img.reshape(-1, 13), r_img.reshape(-1, 13), dim=-1)
    assert cos.min() >= (0.999999 if prec == "f32" else 0.9999), float(cos.min())
    if prec == "f32":
        assert (e_img - r_img).abs().max() <= 1e-4


def test_emulated_op_rejects_bad_input():
    scene = _tile_scene(3, 10, (0.2, 0.9), 3)
    with pytest.raises(ValueError, match="precision"):
        OPS.emulate_mma_tile(*scene[:4], 1, 1, TS, W_IMG, H_IMG, scene[4], 5)
    with pytest.raises(ValueError, match="tile"):
        OPS.emulate_mma_tile(*scene[:4], 9, 1, TS, W_IMG, H_IMG, scene[4], 0)
