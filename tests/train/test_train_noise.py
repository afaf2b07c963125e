"""Densification's counter-based noise (gsrender.train.noise): splitmix64 on int64 tensors is the
reference 64-bit hash, the normals are standard and depend on (seed, id) only, and a split draws
the same children whatever the Gaussians' order (what makes N ranks train as one process)."""
from __future__ import annotations

import torch

from gsrender.train import DensifyConfig, GradStats, TrainConfig, Trainer, densify_and_prune
from gsrender.train.noise import child_ids, normal, splitmix64
from gsrender.train.params import NAMES

MASK = (1 << 64) - 1


def _splitmix64_reference(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def test_splitmix64_matches_the_reference_bits():
    xs = [0, 1, 2, 3, -1, -(1 << 63), (1 << 63) - 1, 123456789012345, -987654321]
    got = splitmix64(torch.tensor(xs, dtype=torch.int64)).tolist()
    assert [g & MASK for g in got] == [_splitmix64_reference(x & MASK) for x in xs]
    assert _splitmix64_reference(0) == 0xE220A8397B1DCDAF  # SplittableRandom(0)'s first output


def test_normals_are_standard_and_keyed_by_seed_and_id():
    ids = torch.arange(100_000, dtype=torch.int64)
    z = normal(ids, seed=3, dim=3)
    assert z.shape == (100_000, 3) and z.dtype == torch.float32
    # mean 0 (sd 1/sqrt(n) = 0.003), variance 1, uncorrelated components, normal tails
    assert float(z.mean(0).abs().max()) < 0.02
    torch.testing.assert_close(torch.cov(z.T), torch.eye(3), atol=0.02, rtol=0)
    assert 0.040 < float((z.abs() > 2).float().mean()) < 0.051  # 4.55 % for N(0, 1)
    perm = torch.randperm(ids.numel(), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(normal(ids[perm], 3, 3), z[perm], rtol=0, atol=0)  # order-free
    assert not torch.allclose(normal(ids, 4, 3), z)  # the seed matters
    kids = [child_ids(ids[:1000], event, c) for event in (2, 4) for c in range(3)]
    assert torch.cat(kids).unique().numel() == 6000  # children of one parent: distinct ids


def _trainer_with_gradients(order: torch.Tensor) -> Trainer:
    g = torch.Generator().manual_seed(1)
    n = 40
    params = {"means": torch.randn(n, 3, generator=g), "log_scales": torch.rand(n, 3, generator=g) * 2 - 4,
              "quats": torch.randn(n, 4, generator=g), "logit_opacities": torch.randn(n, generator=g),
              "sh_dc": torch.randn(n, 1, 3, generator=g), "sh_rest": torch.zeros(n, 3, 3)}
    grads = torch.rand(n, generator=g) * 1e-3
    tr = Trainer({k: v[order] for k, v in params.items()}, 2.0, TrainConfig(steps=10),
                 ids=torch.arange(n)[order])
    tr.stats = GradStats(n, tr.device)
    tr.stats.accum[:], tr.stats.denom[:] = grads[order], 1
    return tr


def test_densification_does_not_depend_on_the_order_of_the_gaussians():
    """The same Gaussians in another order (another shard layout) get the same clones, the same
    split children at the same positions and, under a binding cap, the same choice."""
    runs = []
    for order in (torch.arange(40), torch.randperm(40, generator=torch.Generator().manual_seed(2))):
        tr = _trainer_with_gradients(order)
        cfg = DensifyConfig(grad_threshold=2e-4, percent_dense=0.03, max_gaussians=60)
        ev, ids, _ = densify_and_prune(tr.params, tr.opt, tr.stats, cfg, tr.extent, False, tr.ids,
                                    seed=5, event=3)
        # the cap binds: 20 of the ~32 candidates (largest gradients) clone or split
        assert ev["cloned"] > 0 and ev["split"] > 0 and ev["cloned"] + ev["split"] == 20, ev
        srt = ids.argsort()
        runs.append((ev, ids[srt], {k: tr.params[k].detach()[srt] for k in NAMES}))
    (ev0, ids0, p0), (ev1, ids1, p1) = runs
    assert ev0 == ev1 and torch.equal(ids0, ids1)
    for k in NAMES:
        torch.testing.assert_close(p1[k], p0[k], rtol=1e-6, atol=1e-7)
