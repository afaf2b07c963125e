"""`gsrender voda` on the real plant (../shared/data/plant/plant.splat, Marcel Padilla,
CC-BY-4.0) with the masks a user would have: per-view instance masks, numbered independently in
each view, with an ignore value.

    python scripts/voda_plant_demo.py masks [--out out/voda_plant]   # cameras.json + masks/*.png
    gsrender voda ... (the command `masks` prints)                     # associate, train, remove
    python scripts/voda_plant_demo.py figure [--out out/voda_plant]  # docs/images/voda_plant_removal.png

The plant comes without cameras or masks. Cameras: 2 rings of 6 orbit views (elevations 10°
and 40°, 160x120). Masks: a 2D colour rule on each rendered view, as a user might make with a
colour-key tool (no 3D information): the pot is bright and unsaturated (HSV saturation < 0.25,
value > 0.5), the foliage greenish (hue 40-200°, saturation >= 0.2); every other covered pixel
(soil, stems, dark or mixed colours) and a 1-px band along every mask's border is the ignore
value 255; uncovered pixels are background 0. Each view gives its two masks two random distinct
ids in 1..20, so the ids must be associated across views (--associate)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch

from gsrender.io.paths import data_dir

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PLANT = data_dir() / "plant" / "plant.splat"
W, H = 160, 120
IGNORE = 255


def _hsv(rgb: torch.Tensor):
    mx, mn = rgb.max(-1).values, rgb.min(-1).values
    d = (mx - mn).clamp_min(1e-6)
    r, g, b = rgb.unbind(-1)
    h = torch.where(mx == r, ((g - b) / d) % 6, torch.where(mx == g, (b - r) / d + 2,
                                                            (r - g) / d + 4)) * 60.0
    return h, (mx - mn) / mx.clamp_min(1e-6), mx


def colour_masks(rgb: torch.Tensor, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """bool [H,W] pot and foliage masks of one view, each eroded by 1 px (border band ignored)."""
    from gsrender.voda.metrics import erode

    h, s, v = _hsv(rgb)
    covered = alpha > 0.5
    pot = covered & (s < 0.25) & (v > 0.5)
    leaf = covered & (h >= 40) & (h <= 200) & (s >= 0.2)
    return erode(pot[None], 1)[0], erode(leaf[None], 1)[0]


def make_masks(out: Path, seed: int = 0) -> None:
    import imageio.v3 as iio

    from gsrender.cameras import scene_orbit
    from gsrender.io import load_splat
    from gsrender.render import rasterize
    from gsrender.synthetic import cameras_to_json
    from gsrender.viz import save_image

    model = load_splat(PLANT)
    cams = [c for el in (10.0, 40.0) for c in scene_orbit(model.means, 6, W, H, 50.0, "-y",
                                                          elevation_deg=el)]
    names = [f"{c.name}_el{el}" for el, c in zip([10] * 6 + [40] * 6, cams)]
    vm = torch.stack([c.viewmat for c in cams])
    K = torch.stack([c.K for c in cams])
    (out / "masks").mkdir(parents=True, exist_ok=True)
    (out / "cameras.json").write_text(cameras_to_json(vm, K, W, H, names))
    gen = torch.Generator().manual_seed(seed)
    click = None
    with torch.no_grad():
        r = rasterize(model.means, model.quats, model.scales, model.opacities, model.sh, vm, K,
                      W, H, sh_degree=model.sh_degree)
    for c, nm in enumerate(names):
        pot, leaf = colour_masks(r.colors[c], r.alphas[c, ..., 0])
        m = np.zeros((H, W), np.uint8)
        m[(r.alphas[c, ..., 0] > 0.5).numpy()] = IGNORE
        ids = (torch.randperm(20, generator=gen)[:2] + 1).tolist()
        m[pot.numpy()], m[leaf.numpy()] = ids[0], ids[1]
        iio.imwrite(out / "masks" / f"{nm}.png", m)
        save_image(out / "views" / f"{nm}.png", r.colors[c].clamp(0, 1))
        if c == 0:  # the click: the middle pixel of the pot mask in the first view
            ys, xs = np.nonzero(pot.numpy())
            j = np.argsort(ys)[len(ys) // 2]
            click = (nm, int(xs[j]), int(ys[j]))
    cmd = (f"gsrender voda --scene {os.path.relpath(PLANT)} --cameras-json "
           f"{out}/cameras.json --masks {out}/masks --ignore {IGNORE} --associate --click "
           f"{click[0]} {click[1]} {click[2]} --iters 100 --out {out}/run")
    (out / "command.txt").write_text(cmd + "\n")
    print(cmd)


def _mask_rgb(m: np.ndarray) -> np.ndarray:
    """Background black, ignored grey, each id its own colour (the same id, the same colour in
    every view, so the per-view numbering shows)."""
    from matplotlib import colormaps

    rgb = np.zeros((*m.shape, 3))
    rgb[m == IGNORE] = 0.5
    for i in np.unique(m):
        if 0 < i < IGNORE:
            rgb[m == i] = colormaps["tab20"](int(i) % 20)[:3]
    return rgb


def image_grid(cols, n_rows: int, title: str, path: Path, figsize, dpi: int,
               row_labels=None) -> Path:
    """A PNG of n_rows x len(cols) images: cols = [(column title, load(row) -> image)]."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    for r in range(n_rows):
        for c, (head, load) in enumerate(cols):
            ax = fig.add_subplot(n_rows, len(cols), r * len(cols) + c + 1)
            ax.imshow(load(r), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(head, fontsize=8)
            if c == 0 and row_labels:
                ax.set_ylabel(row_labels[r], fontsize=8)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    print(f"wrote {path}")
    return path


def figure(out: Path, images: Path) -> Path:
    """Original / mask (view 0 ids) / removed / extracted for 3 views."""
    import imageio.v3 as iio

    names = [c["name"] for c in json.loads((out / "cameras.json").read_text())]
    rep = json.loads((out / "run" / "metrics.json").read_text())
    pick = [0, 3, 8]
    nm = lambda r: names[pick[r]]
    run = lambda r, part: iio.imread(out / "run" / part / f"view_{pick[r]:03d}.png")
    cols = (("original render", lambda r: iio.imread(out / "views" / f"{nm(r)}.png")),
            ("user's mask (colour = id in that view)",
             lambda r: _mask_rgb(iio.imread(out / "masks" / f"{nm(r)}.png"))),
            ("pot removed", lambda r: run(r, "removed")),
            ("pot extracted", lambda r: run(r, "extracted")))
    path = image_grid(cols, len(pick),
                      f"gsrender voda on plant.splat (Marcel Padilla, CC-BY-4.0): {rep['baseline']}"
                      f"{'+VODA' if rep['voda'] else ''}, {rep['selected']} of "
                      f"{rep['n_gaussians']} Gaussians selected",
                      images / "voda_plant_removal.png", (8, 2.0 * len(pick) + 0.4), 110)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("masks", "figure"))
    ap.add_argument("--out", type=Path, default=Path("out/voda_plant"))
    ap.add_argument("--images", type=Path, default=ROOT / "docs" / "images")
    args = ap.parse_args(argv)
    if not PLANT.exists():
        print(f"no {PLANT}: ../shared/data is absent", file=sys.stderr)
        return 1
    if args.step == "masks":
        make_masks(args.out)
    else:
        figure(args.out, args.images)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
