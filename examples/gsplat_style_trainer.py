"""A small 3DGS training loop written the way gsplat's examples (simple_trainer.py) use
`gsplat.rasterization`: per-parameter Adam optimizers over a ParameterDict (means, scales, quats,
opacities, sh0, shN), SH degree raised during training, render_mode="RGB+ED", absgrad=True,
packed=False, and the densification statistics of gsplat's DefaultStrategy taken from
meta["means2d"].absgrad / meta["radii"] / meta["gaussian_ids"].

It needs no dataset: a seeded "teacher" cloud of Gaussians is rendered from an orbit of cameras
with the same rasterization() to give the target images, and a "student" initialised from noisy
teacher points (as from SfM points) is fitted to them.

With gsplat installed (CUDA):  python examples/gsplat_style_trainer.py --device cuda
With gsrender: replace the import line below by
    from gsrender.compat.gsplat import rasterization
and nothing else (tests/train/test_gsplat_style_trainer.py does exactly that, on the CPU).
"""
from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from gsplat import rasterization

# ---------------------------------------------------------------------------------------------
# cameras and data


def look_at(eye: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """World-to-camera [4,4] (OpenCV: x right, y down, z forward), world up = +z."""
    fwd = F.normalize(target - eye, dim=0)
    right = F.normalize(torch.linalg.cross(fwd, torch.tensor([0.0, 0.0, 1.0])), dim=0)
    down = torch.linalg.cross(fwd, right)
    R = torch.stack([right, down, fwd])  # rows: camera axes in world coordinates
    m = torch.eye(4)
    m[:3, :3] = R
    m[:3, 3] = -R @ eye
    return m


def orbit(n: int, width: int, height: int, radius: float = 3.0) -> tuple[torch.Tensor, torch.Tensor]:
    """viewmats [n,4,4] on a circle 1 unit above the origin, looking at it; Ks [n,3,3] (60° fov)."""
    vms = []
    for i in range(n):
        a = 2 * math.pi * i / n
        eye = torch.tensor([radius * math.cos(a), radius * math.sin(a), 1.0])
        vms.append(look_at(eye, torch.zeros(3)))
    f = 0.5 * width / math.tan(math.radians(30.0))
    K = torch.tensor([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]])
    return torch.stack(vms), K.expand(n, 3, 3).clone()


def teacher(n: int, sh_degree: int, gen: torch.Generator) -> dict:
    """A seeded blob of coloured Gaussians (activated parameters), SH [n,K,3]."""
    K = (sh_degree + 1) ** 2
    sh = torch.zeros(n, K, 3)
    sh[:, 0] = (torch.rand(n, 3, generator=gen) - 0.5) / 0.28209479177387814  # colours in [0,1]
    sh[:, 1:] = 0.1 * torch.randn(n, K - 1, 3, generator=gen)
    return {"means": torch.randn(n, 3, generator=gen) * 0.6,
            "quats": F.normalize(torch.randn(n, 4, generator=gen), dim=-1),
            "scales": torch.exp(torch.randn(n, 3, generator=gen) * 0.3 - 2.5),
            "opacities": 0.3 + 0.6 * torch.rand(n, generator=gen), "sh": sh}


# ---------------------------------------------------------------------------------------------
# model, as simple_trainer.create_splats_with_optimizers


def knn_scale(points: torch.Tensor, k: int = 3) -> torch.Tensor:
    """Mean distance to the k nearest other points [N] (initial Gaussian size)."""
    d = torch.cdist(points, points)
    d.fill_diagonal_(float("inf"))
    return d.topk(k, dim=-1, largest=False).values.mean(-1)


def create_splats_with_optimizers(points: torch.Tensor, rgbs: torch.Tensor, sh_degree: int, device,
                                  init_opacity: float = 0.1, scene_scale: float = 1.0):
    N = points.shape[0]
    dist = knn_scale(points).clamp_min(1e-4)
    colors = torch.zeros(N, (sh_degree + 1) ** 2, 3)
    colors[:, 0] = (rgbs - 0.5) / 0.28209479177387814
    params = [
        # name, value, lr (gsplat's defaults)
        ("means", points, 1.6e-4 * scene_scale),
        ("scales", torch.log(dist)[:, None].repeat(1, 3), 5e-3),
        ("quats", torch.rand(N, 4), 1e-3),
        ("opacities", torch.logit(torch.full((N,), init_opacity)), 5e-2),
        ("sh0", colors[:, :1], 2.5e-3),
        ("shN", colors[:, 1:], 2.5e-3 / 20),
    ]
    splats = torch.nn.ParameterDict({n: torch.nn.Parameter(v) for n, v, _ in params}).to(device)
    optimizers = {n: torch.optim.Adam([{"params": splats[n], "lr": lr, "name": n}], eps=1e-15)
                  for n, _, lr in params}
    return splats, optimizers


# ---------------------------------------------------------------------------------------------
# densification statistics, as gsplat's DefaultStrategy._update_state


def new_state(n: int, device) -> dict:
    return {"grad2d": torch.zeros(n, device=device), "count": torch.zeros(n, device=device),
            "radii": torch.zeros(n, device=device)}


def update_state(state: dict, info: dict, packed: bool = False, absgrad: bool = True) -> None:
    grads = info["means2d"].absgrad if absgrad else info["means2d"].grad
    grads = grads.clone()
    grads[..., 0] *= info["width"] / 2.0 * info["n_cameras"]
    grads[..., 1] *= info["height"] / 2.0 * info["n_cameras"]
    if packed:
        gs_ids = info["gaussian_ids"]  # [nnz]
        radii = info["radii"]  # [nnz, 2]
    else:
        sel = (info["radii"] > 0.0).all(dim=-1)  # [C, N]
        gs_ids = torch.where(sel)[1]  # [nnz]
        grads = grads[sel]  # [nnz, 2]
        radii = info["radii"][sel]  # [nnz, 2]
    state["grad2d"].index_add_(0, gs_ids, grads.norm(dim=-1))
    state["count"].index_add_(0, gs_ids, torch.ones_like(gs_ids, dtype=torch.float32))
    state["radii"][gs_ids] = torch.maximum(
        state["radii"][gs_ids], radii.max(dim=-1).values / float(max(info["width"], info["height"])))


# ---------------------------------------------------------------------------------------------
# training


def train(steps: int = 100, n_teacher: int = 300, n_student: int = 200, width: int = 64, height: int = 48,
          n_views: int = 8, sh_degree: int = 1, device: str = "cpu", seed: int = 0, log_every: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    viewmats, Ks = orbit(n_views, width, height)
    viewmats, Ks = viewmats.to(device), Ks.to(device)
    t = {k: v.to(device) for k, v in teacher(n_teacher, sh_degree, gen).items()}
    with torch.no_grad():
        targets, _, _ = rasterization(t["means"], t["quats"], t["scales"], t["opacities"], t["sh"],
                                      viewmats, Ks, width, height, sh_degree=sh_degree, packed=False)
    # student: noisy subset of the teacher's centres with their colours, like SfM initialisation
    idx = torch.randperm(n_teacher, generator=gen)[:n_student]
    points = t["means"][idx].cpu() + 0.05 * torch.randn(n_student, 3, generator=gen)
    rgbs = (t["sh"][idx, 0].cpu() * 0.28209479177387814 + 0.5).clamp(0, 1)
    splats, optimizers = create_splats_with_optimizers(points, rgbs, sh_degree, device)
    for opt in optimizers.values():  # faster than gsplat's defaults: this run is short
        for g in opt.param_groups:
            g["lr"] *= 10
    state = new_state(n_student, device)
    losses = []
    for step in range(steps):
        c = step % n_views
        sh_degree_to_use = min(step // max(1, steps // (sh_degree + 1)), sh_degree)
        colors = torch.cat([splats["sh0"], splats["shN"]], 1)  # [N, K, 3]
        renders, _alphas, info = rasterization(
            means=splats["means"], quats=splats["quats"], scales=torch.exp(splats["scales"]),
            opacities=torch.sigmoid(splats["opacities"]), colors=colors,
            viewmats=viewmats[c:c + 1], Ks=Ks[c:c + 1], width=width, height=height,
            sh_degree=sh_degree_to_use, packed=False, absgrad=True, render_mode="RGB+ED",
            rasterize_mode="classic")
        info["means2d"].retain_grad()  # DefaultStrategy.step_pre_backward
        colors_out, depths = renders[..., :3], renders[..., 3:4]  # [1, H, W, 3], [1, H, W, 1]
        loss = F.l1_loss(colors_out, targets[c:c + 1])
        loss.backward()
        update_state(state, info)
        for opt in optimizers.values():
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses.append(loss.detach().item())
        if log_every and step % log_every == 0:
            print(f"step {step:4d}  l1 {losses[-1]:.4f}  mean depth {float(depths.detach().mean()):.3f}")
    grads = state["grad2d"] / state["count"].clamp_min(1)
    return {"losses": losses, "grad2d_mean": grads, "count": state["count"], "max_radii": state["radii"],
            "n_clone_candidates": int((grads > 2e-4).sum())}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--device", default="cpu")
    p.add_argument("--sh-degree", type=int, default=1)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--height", type=int, default=48)
    args = p.parse_args(argv)
    out = train(args.steps, width=args.width, height=args.height, sh_degree=args.sh_degree,
                device=args.device, log_every=max(1, args.steps // 10))
    print(f"l1: {out['losses'][0]:.4f} -> {out['losses'][-1]:.4f}; "
          f"densification candidates (|grad2d| > 2e-4): {out['n_clone_candidates']}")
    return out


if __name__ == "__main__":
    main()
