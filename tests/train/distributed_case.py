"""One rank of tests/train/test_distributed.py's render check (run as `python distributed_case.py OUT`
under an env:// rendezvous), and the scene both sides build: the rank renders its shard into its
cameras with gsrender.distributed.rasterize, back-propagates a fixed linear loss of its images and
saves images and gradients to OUT/rank{R}.pt for the test to compare with one process."""
from __future__ import annotations

import sys

import torch

from gsrender.synthetic import orbit_cameras

N, W, H, D, SH_DEGREE = 500, 40, 32, 2, 1
CAMERAS_OF_RANK = ([0, 1], [2])  # uneven on purpose
MODES = (("sorted", "fp32"), ("weighted", "auto"))
LEAVES = ("means", "quats", "scales", "opacities", "sh", "features")


def scene(seed: int = 0) -> dict:
    """float32 leaves of N Gaussians in front of 3 orbit cameras, the loss weights, and the
    Gaussians' split over the ranks (a random partition, not a contiguous one)."""
    g = torch.Generator().manual_seed(seed)
    vms, Ks = orbit_cameras(3, 4.0, 1.0, width=W, height_px=H, fov_deg=60.0)
    C = vms.shape[0]
    return {
        "means": torch.randn(N, 3, generator=g) * 0.7,
        "quats": torch.randn(N, 4, generator=g),
        "scales": torch.empty(N, 3).uniform_(-3.5, -1.8, generator=g).exp(),
        "opacities": torch.empty(N).uniform_(0.1, 0.95, generator=g),
        "sh": torch.randn(N, (SH_DEGREE + 1) ** 2, 3, generator=g) * 0.4,
        "features": torch.randn(N, D, generator=g),
        "viewmats": vms.float(), "Ks": Ks.float(),
        "backgrounds": torch.rand(C, 3, generator=g),
        "w": {k: torch.randn(C, H, W, ch, generator=g)
              for k, ch in (("colors", 3), ("depths", 1), ("alphas", 1), ("features", D))},
        "shards": torch.randperm(N, generator=g).chunk(len(CAMERAS_OF_RANK)),
    }


def loss(out, w: dict, cams) -> torch.Tensor:
    return sum((getattr(out, k) * w[k][cams]).sum() for k in w)


def main(path: str) -> None:
    import torch.distributed as dist

    from gsrender import distributed as Dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    s, cams = scene(), CAMERAS_OF_RANK[rank]
    idx = s["shards"][rank]
    result = {}
    for mode, precision in MODES:
        leaves = {k: s[k][idx].clone().requires_grad_(True) for k in LEAVES}
        vm = s["viewmats"][cams].clone().requires_grad_(True)
        out = Dist.rasterize(leaves["means"], leaves["quats"], leaves["scales"], leaves["opacities"],
                             leaves["sh"], vm, s["Ks"][cams], W, H, sh_degree=SH_DEGREE,
                             features=leaves["features"], backgrounds=s["backgrounds"][cams],
                             mode=mode, precision=precision)
        loss(out, s["w"], cams).backward()
        result[mode] = {"out": {k: getattr(out, k).detach() for k in s["w"]},
                        "grads": {k: t.grad for k, t in leaves.items()}, "viewmats": vm.grad,
                        "exchange": out.meta["exchange"]}
    torch.save(result, f"{path}/rank{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
