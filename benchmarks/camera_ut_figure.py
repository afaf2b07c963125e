"""Where EWA and the unscented transform differ (docs/cameras.md): a few large Gaussians seen by a
~180° fisheye, without and with strong k1..k4 distortion, projected three ways and compared as 2D
densities:

- EWA: the lens's tangent map at each mean (for the distorted lens its Jacobian by forward-mode
  differentiation of gsrender.distortion's map; without distortion this is the projection op's
  EWA, which the script checks);
- UT: gsrender's unscented projection (with_ut=True);
- Monte Carlo: n samples of each 3D Gaussian through the exact lens, histogrammed per pixel and
  blurred with a 1 px Gaussian (a kernel density estimate).

The analytic densities get the same blur (eps2d = 1 + 1/12 px²: the kernel and the histogram's
binning), so each method's error is L1 = Σ_pixels |p − p_MC| per Gaussian (0..2), with the
error of the mean (px) and the relative error of the covariance against the samples' moments.
The L1 between two independent Monte-Carlo runs is the noise floor of those numbers.
Writes OUT/camera_ut.json and the figure (--figure).

    python benchmarks/camera_ut_figure.py --out out/camera_ut --figure docs/images/camera_ut.png
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gsrender import distortion, geometry, ops, projection
from gsrender.ewa import screen_gaussians
from gsrender.io import atomic

F64 = torch.float64
# (θ from the axis in degrees, azimuth in degrees, distance, scales): large Gaussians, some near
# the rim of the fisheye's view
GAUSSIANS = [(15, 0, 1.5, (0.25, 0.10, 0.10)), (45, 60, 1.2, (0.20, 0.20, 0.05)),
             (65, 150, 1.0, (0.30, 0.08, 0.15)), (78, 220, 1.0, (0.20, 0.20, 0.20)),
             (84, 300, 1.3, (0.25, 0.05, 0.20)), (55, 270, 0.8, (0.15, 0.15, 0.04))]
COLORS = torch.tensor([[0.9, 0.2, 0.2], [0.2, 0.7, 0.2], [0.2, 0.3, 0.9], [0.9, 0.7, 0.1],
                       [0.7, 0.2, 0.8], [0.1, 0.7, 0.8]], dtype=F64)
LENSES = {"fisheye": None, "fisheye + k1, k2": [-0.08, 0.004, 0.0, 0.0]}
KERNEL_VAR = 1.0  # the density estimate's blur, px²
EPS2D = KERNEL_VAR + 1 / 12  # ... plus the variance of a uniform 1 px bin


def scene(seed: int = 0):
    """Camera-space Gaussians (the camera is the identity): means [G,3], quats [G,4], scales [G,3]."""
    g = torch.Generator().manual_seed(seed)
    means = []
    for theta, phi, dist, _ in GAUSSIANS:
        t, p = math.radians(theta), math.radians(phi)
        means.append([dist * math.sin(t) * math.cos(p), dist * math.sin(t) * math.sin(p),
                      dist * math.cos(t)])
    quats = torch.randn(len(GAUSSIANS), 4, generator=g, dtype=F64)
    scales = torch.tensor([s for *_, s in GAUSSIANS], dtype=F64)
    return torch.tensor(means, dtype=F64), quats, scales


def camera(size: int, k):
    """A fisheye whose 90° circle (through the coefficients k) is 0.47·size from the centre."""
    k = [0.0] * 4 if k is None else k
    t = math.pi / 2
    theta_d = t * (1 + k[0] * t ** 2 + k[1] * t ** 4 + k[2] * t ** 6 + k[3] * t ** 8)
    f = 0.47 * size / theta_d
    K = torch.tensor([[[f, 0, size / 2], [0, f, size / 2], [0, 0, 1]]], dtype=F64)
    return torch.eye(4, dtype=F64)[None], K, ({"radial_coeffs": torch.tensor([k], dtype=F64)}
                                              if any(k) else {})


def ewa(means, covars, viewmats, Ks, size, coeffs):
    """means2d [1,G,2] and the blurred conics [1,G,3] of the tangent map at each mean."""
    lens = distortion.lens("fisheye", Ks, size, size, **coeffs)

    def pixel(p):
        return distortion.image_points(lens, p[None, None])[0][0, 0]

    m2d = torch.stack([pixel(p) for p in means])[None]
    J = torch.stack([torch.func.jacfwd(pixel)(p) for p in means])  # [G,2,3]
    cov = J @ covars @ J.transpose(-1, -2)
    cov2d = torch.stack([cov[:, 0, 0], cov[:, 0, 1], cov[:, 1, 1]], -1)[None]
    keep = torch.ones(1, means.shape[0], dtype=torch.bool)
    out = screen_gaussians(m2d, cov2d, means[None, :, 2], keep,
                           torch.ones(means.shape[0], dtype=F64), size, size, EPS2D, 0.0, False)
    return out["means2d"], out["conics"]


def ut(means, quats, scales, viewmats, Ks, size, coeffs):
    out = projection.project(means, quats, scales, torch.ones(means.shape[0], dtype=F64), viewmats,
                             Ks, size, size, EPS2D, 0.01, 1e10, 0.0, False, "fisheye",
                             with_ut=True, **coeffs)
    assert bool((out[0] > 0).all()), "every Gaussian is in the view"
    return out[1], out[3]


def densities(means2d, conics, size):
    """The normalised 2D Gaussians at the pixel centres [G,H,W] (each sums to ~1 over the plane)."""
    c = torch.arange(size, dtype=F64) + 0.5
    ys, xs = torch.meshgrid(c, c, indexing="ij")
    dx = xs[None] - means2d[0, :, 0, None, None]
    dy = ys[None] - means2d[0, :, 1, None, None]
    a, b, cc = (conics[0, :, i, None, None] for i in range(3))
    det = a * cc - b * b
    return det.sqrt() / (2 * math.pi) * torch.exp(-0.5 * (a * dx * dx + 2 * b * dx * dy + cc * dy * dy))


def monte_carlo(means, covars, Ks, size, coeffs, n: int, seed: int = 1):
    """Per Gaussian: the blurred histogram of n samples' pixels [G,H,W] (normalised by n) and the
    samples' pixel mean [G,2] and covariance [G,2,2]."""
    g = torch.Generator().manual_seed(seed)
    lens = distortion.lens("fisheye", Ks, size, size, **coeffs)
    r = 4
    x = torch.arange(-r, r + 1, dtype=F64)
    k1d = torch.exp(-0.5 * x * x / KERNEL_VAR)
    k1d = (k1d / k1d.sum())[None, None]
    hists, mus, covs = [], [], []
    for m, S in zip(means, covars, strict=True):
        L = torch.linalg.cholesky(S)
        h = torch.zeros(size * size, dtype=F64)
        s1, s2, count = torch.zeros(2, dtype=F64), torch.zeros(2, 2, dtype=F64), 0
        for start in range(0, n, 1 << 20):
            p = m + torch.randn(min(1 << 20, n - start), 3, generator=g, dtype=F64) @ L.T
            pix, ok = distortion.image_points(lens, p[None])
            pix = pix[0][ok[0]]
            s1, s2, count = s1 + pix.sum(0), s2 + pix.T @ pix, count + pix.shape[0]
            ij = pix.floor().long()
            inside = ((ij >= 0) & (ij < size)).all(-1)
            h.index_add_(0, ij[inside, 1] * size + ij[inside, 0],
                         torch.ones(int(inside.sum()), dtype=F64))
        h = h.reshape(1, 1, size, size) / n
        h = torch.nn.functional.conv2d(torch.nn.functional.pad(h, (r, r, 0, 0)), k1d[..., None, :])
        h = torch.nn.functional.conv2d(torch.nn.functional.pad(h, (0, 0, r, r)), k1d[..., :, None])
        hists.append(h[0, 0])
        mu = s1 / count
        mus.append(mu)
        covs.append(s2 / count - torch.outer(mu, mu))
    return torch.stack(hists), torch.stack(mus), torch.stack(covs)


def cov_of(conics):
    a, b, c = conics[0].unbind(-1)
    det = a * c - b * b
    cov = torch.stack([torch.stack([c, -b], -1), torch.stack([-b, a], -1)], -2) / det[:, None, None]
    return cov - EPS2D * torch.eye(2, dtype=F64)


def run(size: int, n: int) -> tuple[dict, dict]:
    means, quats, scales = scene()
    covars = geometry.covariances(quats, scales)
    result = {"size": size, "samples_per_gaussian": n, "kernel_px2": KERNEL_VAR,
              "gaussians": [{"theta_deg": t, "azimuth_deg": p, "distance": d, "scales": list(s)}
                            for t, p, d, s in GAUSSIANS], "lenses": []}
    images = {}
    for name, k in LENSES.items():
        vms, Ks, coeffs = camera(size, k)
        methods = {"EWA": ewa(means, covars, vms, Ks, size, coeffs),
                   "UT": ut(means, quats, scales, vms, Ks, size, coeffs)}
        if not coeffs:  # the tangent map here is the projection op's EWA
            op = ops.project(means.float(), quats.float(), scales.float(), torch.ones(len(means)),
                             vms.float(), Ks.float(), size, size, EPS2D, 0.01, 1e10, 0.0, False,
                             "fisheye")
            torch.testing.assert_close(op[1].double(), methods["EWA"][0], atol=1e-3, rtol=0)
            torch.testing.assert_close(op[3].double(), methods["EWA"][1], atol=1e-6, rtol=1e-3)
        mc, mc_mu, mc_cov = monte_carlo(means, covars, Ks, size, coeffs, n)
        mc2, _, _ = monte_carlo(means, covars, Ks, size, coeffs, n, seed=2)
        entry = {"lens": name, "radial_coeffs": k, "focal_px": float(Ks[0, 0, 0]),
                 "monte_carlo_noise_l1_mean": round(float((mc2 - mc).abs().sum((-2, -1)).mean()), 4),
                 "methods": {}}
        images[name] = {"Monte Carlo": mc}
        for method, (m2d, con) in methods.items():
            dens = densities(m2d, con, size)
            images[name][method] = dens
            l1 = (dens - mc).abs().sum((-2, -1))
            cov = cov_of(con)
            entry["methods"][method] = {
                "l1": [round(float(v), 4) for v in l1],
                "l1_mean": round(float(l1.mean()), 4),
                "mean_error_px": round(float((m2d[0] - mc_mu).norm(dim=-1).mean()), 3),
                "cov_rel_error": round(float(((cov - mc_cov).norm(dim=(-2, -1))
                                               / mc_cov.norm(dim=(-2, -1))).mean()), 4)}
        result["lenses"].append(entry)
    return result, images


def figure(result: dict, images: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = ("EWA", "UT", "Monte Carlo")
    fig, axes = plt.subplots(len(images), 3, figsize=(10.5, 3.6 * len(images)))
    for row, entry in zip(axes, result["lenses"], strict=True):
        for ax, method in zip(row, cols, strict=True):
            d = images[entry["lens"]][method]  # [G,H,W]
            d = d / d.amax((-2, -1), keepdim=True).clamp_min(1e-30)  # each Gaussian's peak at 1
            rgb = 1 - torch.einsum("ghw,gc->hwc", d, 1 - COLORS).clamp(0, 1)
            ax.imshow(rgb.numpy(), interpolation="nearest")
            title = method if method not in entry["methods"] else \
                f"{method}: L1 {entry['methods'][method]['l1_mean']:.3f}"
            ax.set_title(f"{entry['lens']}\n{title}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=256, help="image width = height, px")
    p.add_argument("--samples", type=int, default=4_000_000, help="Monte-Carlo samples per Gaussian")
    p.add_argument("--out", default="out/camera_ut", help="folder for camera_ut.json")
    p.add_argument("--figure", default=None, help="the figure's path (default OUT/camera_ut.png)")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    result, images = run(a.size, a.samples)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "camera_ut.json", json.dumps(result, indent=1) + "\n")
    figure(result, images, Path(a.figure) if a.figure else out / "camera_ut.png")
    for entry in result["lenses"]:
        print(entry["lens"], {m: v["l1_mean"] for m, v in entry["methods"].items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
