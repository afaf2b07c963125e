"""The Tensor Core BACKWARD rasterizer, proven on the CPU (docs/design.md §5.4, issue 3).

csrc/cpu/mma_bwd_emulation.cpp runs the backward kernel's own lane code (gsrender/mma_fragments.h,
gsrender/mma_bwd_fragments.h) and operand preparation (gsrender/mma_bwd_operands.h) on emulated
warps for one 16×16 tile: dW = Ĝ·F̃ᵀ and dF = Wᵀ·Ĝ through emulated ldmatrix / mma.m16n8k16, the
per-channel operand scaling, the sorted mode's suffix sums S_total − prefix, the weighted mode's
dα and v_depths, AlphaGrad and the 8-lane column reduction. Here its gradients are compared with
float64 autograd through the dense reference on the same tile: f32 operands (the bookkeeping
alone) nearly exact, f16 at the issue's cosine bar 0.999, bf16 at 0.99, also when OUT and T_final
come from the emulated Tensor Core forward (csrc/cpu/mma_emulation.cpp) as in the real pipeline.
"""
from __future__ import annotations

import pytest
import torch
from test_mma_emulation import H_IMG, PREC, TS, W_IMG, _reference_tile, _tile_scene

from gsrender import _C  # noqa: F401  (registers torch.ops.gsrender.*)
from gsrender import reference as ref

OPS = torch.ops.gsrender
F64 = torch.float64
SIGMA_W, BETA, W_BG = 0.05, 1.0, 1e-3
NAMES = ("v_means2d", "v_conics", "v_opacities", "v_colors", "v_depths")
BARS = {"f32": 0.99999, "f16": 0.999, "bf16": 0.99}


def _depths(G: int, mode: str) -> torch.Tensor:
    # list order = depth order (sorted); spread depths so φ(z) varies (weighted)
    return torch.arange(G, dtype=F64) * (0.37 if mode == "weighted" else 1.0) + 1.0


def _case(seed, G, opac, CH, tile, mode, big=False):
    """Scene, loss gradients on the tile's pixels, the reference's forward outputs and gradients."""
    means, conics, opac_t, feats, bg = _tile_scene(seed, G, opac, CH, tile)
    g = torch.Generator().manual_seed(seed + 1000)
    v_render = torch.randn(H_IMG, W_IMG, CH, generator=g, dtype=F64)
    v_alpha = torch.randn(H_IMG, W_IMG, generator=g, dtype=F64)
    if big:  # channels of very different magnitudes: the per-channel operand scaling's case
        feats = feats.clone()
        feats[:, 0] *= 1e5  # beyond f16's range unscaled
        v_render[..., -1] *= 1e-6  # below f16's normal range unscaled
        v_render[..., 1] *= 50.0
    # only the tile's pixels carry a loss, off pixels where float32 may flip a discrete decision
    amb = _reference_tile(means, conics, opac_t, feats, bg, tile)[3]
    keep = torch.zeros(H_IMG, W_IMG, dtype=torch.bool)
    x0, y0 = tile[0] * TS, tile[1] * TS
    keep[y0:y0 + TS, x0:x0 + TS] = True
    keep[y0:y0 + amb.shape[0], x0:x0 + amb.shape[1]] &= ~amb
    v_render, v_alpha = v_render * keep[..., None], v_alpha * keep
    depths = _depths(G, mode)
    leaves = [t.double().requires_grad_() for t in (means, conics, opac_t, feats)]
    dep = depths.clone().requires_grad_()
    wp = (SIGMA_W, BETA, W_BG)
    img, alpha = ref.rasterize(*(t[None] for t in leaves[:3]), leaves[3][None], dep[None], W_IMG,
                               H_IMG, backgrounds=bg.double()[None], mode=mode, weight_params=wp)
    ((img[0] * v_render).sum() + (alpha[0, ..., 0] * v_alpha).sum()).backward()
    v_dep = dep.grad if mode == "weighted" else torch.zeros(G, dtype=F64)
    grads = [t.grad for t in leaves] + [v_dep]
    with torch.no_grad():
        if mode == "sorted":
            aux = 1 - alpha[0, ..., 0]  # T_final
        else:  # Σw + w_bg = w_bg / the background's weight
            bw = ref.blend_weights(*(t.detach()[None] for t in leaves[:3]), depths[None], W_IMG,
                                   H_IMG, mode=mode, weight_params=wp)["bg_weights"][0, ..., 0]
            aux = W_BG / bw
    inputs = {"means2d": means, "conics": conics, "opacities": opac_t, "colors": feats,
              "render": img[0].detach().float(), "alphas": alpha[0, ..., 0].detach().float(),
              "aux": aux.float(), "v_render": v_render.float(), "v_alphas": v_alpha.float(),
              "depths": depths.float() if mode == "weighted" else None, "bg": bg}
    return inputs, grads


def _emulate(inputs, tile, prec):
    """prec: "f32" / "f16" / "bf16" (or a raw precision code)."""
    i = inputs
    return OPS.emulate_mma_bwd_tile(i["means2d"], i["conics"], i["opacities"], i["colors"],
                                    tile[0], tile[1], W_IMG, H_IMG, i["render"], i["alphas"],
                                    i["aux"], i["v_render"], i["v_alphas"], PREC.get(prec, prec),
                                    i["depths"], SIGMA_W, BETA)


def _compare(got, exp, mode):
    """Per parameter: (cosine, relative L2 error) of the flattened gradients."""
    out = {}
    for name, e, r in zip(NAMES, got, exp, strict=True):
        if name == "v_depths" and mode == "sorted":
            assert not e.any(), "sorted mode has no depth gradient"
            continue
        e, r = e.double().flatten(), r.flatten()
        assert r.norm() > 0, f"{name}: the case has no gradient to compare"
        cos = float(torch.nn.functional.cosine_similarity(e, r, dim=0))
        out[name] = (cos, float((e - r).norm() / r.norm()))
    return out


def _check(got, exp, mode, prec):
    stats = _compare(got, exp, mode)
    bad = {k: v for k, v in stats.items() if not v[0] >= BARS[prec]}
    report = ", ".join(f"{k}: cos {c:.6f} rel {r:.2e}" for k, (c, r) in stats.items())
    assert not bad, f"{prec} below the bar {BARS[prec]}: {report}"
    return stats


CASES = {  # (seed, G, opacity range, tile): G ≫ 16 → many groups per warp, > 256 → several chunks
    "stop": (10, 300, (0.5, 0.99), (1, 1)),   # dense + opaque: most pixels stop early
    "nostop": (11, 300, (0.02, 0.25), (1, 1)),
    "edge": (12, 160, (0.3, 0.99), (2, 2)),   # the image corner: partial sub-tiles, idle warps
}


@pytest.mark.parametrize("mode", ["sorted", "weighted"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("CH", [1, 3, 16, 40])  # 1, 3, 40: a masked channel tail
def test_emulated_backward_f32_and_f16(mode, case, CH):
    seed, G, opac, tile = CASES[case]
    inputs, exp = _case(seed + CH, G, opac, CH, tile, mode)
    stats = _check(_emulate(inputs, tile, "f32"), exp, mode, "f32")
    # f32 operands: only float32 arithmetic separates the lanes' bookkeeping from float64
    assert max(r for _, r in stats.values()) <= 1e-3, stats
    _check(_emulate(inputs, tile, "f16"), exp, mode, "f16")


@pytest.mark.parametrize("mode", ["sorted", "weighted"])
@pytest.mark.parametrize("CH", [3, 40])
def test_emulated_backward_bf16(mode, CH):
    seed, G, opac, tile = CASES["stop"]
    inputs, exp = _case(seed + 50 + CH, G, opac, CH, tile, mode)
    _check(_emulate(inputs, tile, "bf16"), exp, mode, "bf16")


@pytest.mark.parametrize("mode", ["sorted", "weighted"])
@pytest.mark.parametrize("prec", ["f16", "bf16"])
def test_emulated_backward_operand_scaling(mode, prec):
    # features ×300 in one channel, loss gradients ×1e-5 in another: without the per-channel
    # scaling f16 would flush the small Ĝ to subnormals / zero and overflow F
    seed, G, opac, tile = CASES["edge"]
    inputs, exp = _case(seed + 77, G, opac, 16, tile, mode, big=True)
    got = _emulate(inputs, tile, prec)
    _check(got, exp, mode, prec)
    for c in range(16):  # every channel on its own, the tiny one included
        cos = torch.nn.functional.cosine_similarity(got[3][:, c].double(), exp[3][:, c], dim=0)
        assert cos >= BARS[prec], f"v_colors channel {c}: cos {float(cos):.6f}"


@pytest.mark.parametrize("prec", ["f16", "bf16"])
@pytest.mark.parametrize("case", ["stop", "edge"])
def test_emulated_forward_then_backward(prec, case):
    # the real pipeline: OUT and T_final (hence S_total = G·OUT − T_final·v_α) come from the
    # Tensor Core forward in the same precision, not from the exact forward
    seed, G, opac, tile = CASES[case]
    inputs, exp = _case(seed + 3, G, opac, 3, tile, "sorted")
    out, T, _ = OPS.emulate_mma_tile(inputs["means2d"], inputs["conics"], inputs["opacities"],
                                     inputs["colors"], tile[0], tile[1], TS, W_IMG, H_IMG,
                                     inputs["bg"], PREC[prec])
    x0, y0 = tile[0] * TS, tile[1] * TS
    h, w = min(TS, H_IMG - y0), min(TS, W_IMG - x0)
    render, aux = inputs["render"].clone(), inputs["aux"].clone()
    render[y0:y0 + h, x0:x0 + w] = out.reshape(TS, TS, 3)[:h, :w]
    aux[y0:y0 + h, x0:x0 + w] = T.reshape(TS, TS)[:h, :w]
    inputs = dict(inputs, render=render, aux=aux, alphas=1 - aux)
    _check(_emulate(inputs, tile, prec), exp, "sorted", prec)


def test_emulated_backward_rejects_bad_input():
    inputs, _ = _case(3, 20, (0.2, 0.9), 3, (1, 1), "sorted")
    with pytest.raises(ValueError, match="precision"):
        _emulate(inputs, (1, 1), 5)
    with pytest.raises(ValueError, match="tile"):
        _emulate(inputs, (9, 1), "f16")
    with pytest.raises(ValueError, match="render"):
        bad = dict(inputs, render=inputs["render"][:, :, :2])
        _emulate(bad, (1, 1), "f16")
