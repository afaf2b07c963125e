"""`gsrender voda --colmap` on a real capture: ../shared/data/snowmiku_small (13 phone photos of
a plush toy on a bed, real COLMAP poses; noname0310/snowmiku2023plush-splat, MIT).

    gsrender train --colmap ../shared/data/snowmiku_small --scale 0.5 --steps 2000 \\
        --max-gaussians 60000 --threads 1 --out out/miku_train            # the 3DGS to segment
    python scripts/voda_snowmiku_demo.py masks [--out out/voda_miku]    # masks/*.png, command.txt
    gsrender voda ... (the command `masks` prints)                       # associate, train, remove
    python scripts/voda_snowmiku_demo.py figure [--out out/voda_miku]   # docs/images/voda_snowmiku_removal.png

The masks are NOT human-annotated and do not come from the trained model. They come from what a
user does in a point-cloud viewer: pick a 3D box around the object in the SfM points. BOX is
given in a frame derived from the cameras alone: origin = the point closest (least squares) to
all optical axes (the cameras aim at the toy), up = minus the mean camera y axis, `front` = the
horizontal direction to the mean camera position. It was chosen by eye, by rendering the SfM
points with the in-box ones in red next to the photos (`--preview`) and enlarging it once so it
took the toy's lower body. Per photo, at half resolution (247x185, the training scale): the SfM
points are splatted as small opaque Gaussians (scale 0.7 x their mean distance to 3 nearest
points) carrying a 1 for in-box points; a pixel is the object where the in-box share of the
splats' weight is > 0.5 (holes of the sparse cloud closed with a 4-px closing and a hole fill),
a 2-px band along the object's border is the ignore value 255, everything else background 0 (the
wall, which SfM barely reconstructed, included). Each photo gives the object a random id in
1..20, so the ids must be associated across views (--associate). Every 8th photo (the views
`gsrender train --hold 8` held out) gets no mask: its box mask goes to masks_heldout/ for the
figure only, and `gsrender voda --missing-masks skip` renders that view without training on
it, so the removal is also shown where no mask was given."""
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

DATA = data_dir() / "snowmiku_small"
SCALE = 0.5     # masks at the training scale (`gsrender train --scale 0.5`)
IGNORE = 255
# (front, side, up) ranges in the camera-derived frame (see the docstring), scene units
BOX = ((-1.2, 1.8), (-1.3, 1.8), (-1.15, 2.2))
CLOSE_PX, BAND_PX = 4, 2
HOLD = 8        # every 8th photo (sorted by name) has no mask given to voda, as in `train --hold 8`


def box_frame(viewmats: torch.Tensor):
    """(origin, [front, side, up] rows) of the frame BOX is given in, from the cameras alone."""
    R, t = viewmats[:, :3, :3], viewmats[:, :3, 3]
    centres = -(R.transpose(1, 2) @ t[..., None])[..., 0]
    axes = R[:, 2]  # optical axes (world)
    proj = torch.eye(3) - axes[:, :, None] * axes[:, None, :]
    origin = torch.linalg.solve(proj.sum(0), (proj @ centres[..., None]).sum(0))[:, 0]
    up = -R[:, 1].mean(0)
    up = up / up.norm()
    front = centres.mean(0) - origin
    front = front - (front @ up) * up
    front = front / front.norm()
    return origin, torch.stack([front, torch.linalg.cross(up, front), up])


def in_box(points: torch.Tensor, viewmats: torch.Tensor) -> torch.Tensor:
    origin, axes = box_frame(viewmats)
    local = (points - origin) @ axes.T
    return torch.stack([(local[:, i] > lo) & (local[:, i] < hi)
                        for i, (lo, hi) in enumerate(BOX)]).all(0)


def splat_points(xyz: torch.Tensor, rgb: torch.Tensor):
    """The SfM points as small, nearly opaque isotropic Gaussians (the GaussianModel fields)."""
    from gsrender.voda.baselines import knn

    nn = knn(xyz, 4)
    d = (xyz[nn[:, 1:]] - xyz[:, None]).norm(dim=-1).mean(1)
    s = (0.7 * d).clamp(max=float(3 * d.median()))
    quats = torch.zeros(len(xyz), 4)
    quats[:, 0] = 1
    sh = ((rgb.float() / 255 - 0.5) / 0.28209479177387814)[:, None]
    return xyz, quats, s[:, None].expand(-1, 3).contiguous(), torch.full((len(xyz),), 0.95), sh


def _fill_holes(mask: torch.Tensor) -> torch.Tensor:
    """[H,W] bool with every region not connected to the image border added."""
    from gsrender.voda.metrics import dilate

    free = ~mask
    reach = torch.zeros_like(mask)
    reach[0], reach[-1], reach[:, 0], reach[:, -1] = free[0], free[-1], free[:, 0], free[:, -1]
    while True:
        nxt = dilate(reach[None], 1)[0] & free
        if torch.equal(nxt, reach):
            return ~reach
        reach = nxt


def _cameras():
    from gsrender.io import load_colmap_cameras

    cams = load_colmap_cameras(DATA / "sparse" / "0")
    W, H = round(cams[0].width * SCALE), round(cams[0].height * SCALE)
    vm = torch.stack([c.viewmat for c in cams])
    K = torch.stack([c.K for c in cams]).clone()
    K[:, 0] *= W / cams[0].width
    K[:, 1] *= H / cams[0].height
    return [c.name for c in cams], vm, K, W, H


def make_masks(out: Path, preview: bool, seed: int = 0) -> None:
    import imageio.v3 as iio

    from gsrender.io import load_colmap_points
    from gsrender.render import rasterize
    from gsrender.voda.metrics import dilate, erode

    names, vm, K, W, H = _cameras()
    xyz, rgb = load_colmap_points(DATA / "sparse" / "0")
    xyz, rgb = torch.from_numpy(xyz), torch.from_numpy(rgb)
    inside = in_box(xyz, vm)
    means, quats, scales, opac, sh = splat_points(xyz, rgb)
    with torch.no_grad():
        r = rasterize(means, quats, scales, opac, sh, vm, K, W, H, sh_degree=0,
                      features=inside.float()[:, None])
    share = r.features[..., 0] / r.alphas[..., 0].clamp_min(1e-6)
    obj = (share > 0.5) & (r.alphas[..., 0] > 0.5)
    obj = erode(dilate(obj, CLOSE_PX), CLOSE_PX)
    obj = torch.stack([_fill_holes(o) for o in obj])
    band = dilate(obj, BAND_PX) & ~erode(obj, BAND_PX)
    for sub in ("masks", "masks_heldout"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    click = None
    for c, nm in enumerate(names):
        m = np.zeros((H, W), np.uint8)
        m[obj[c].numpy()] = int(torch.randint(1, 21, (1,), generator=gen))
        m[band[c].numpy()] = IGNORE
        held = c % HOLD == 0
        iio.imwrite(out / ("masks_heldout" if held else "masks") / f"{Path(nm).stem}.png", m)
        if click is None and not held:  # the click: the mask's middle pixel in the 1st photo
            ys, xs = np.nonzero((m > 0) & (m != IGNORE))
            j = np.argsort(ys)[len(ys) // 2]
            click = (Path(nm).stem, int(xs[j]), int(ys[j]))
    if preview:  # the box check: SfM splats with the in-box points red
        col = rgb.float() / 255
        col[inside] = torch.tensor([1.0, 0.0, 0.0])
        with torch.no_grad():
            p = rasterize(means, quats, scales, opac, ((col - 0.5) / 0.28209479177387814)[:, None],
                          vm, K, W, H, sh_degree=0).colors.clamp(0, 1)
        (out / "preview").mkdir(exist_ok=True)
        for c, nm in enumerate(names):
            iio.imwrite(out / "preview" / f"{Path(nm).stem}.png",
                        (p[c].numpy() * 255).astype(np.uint8))
    print(f"{int(inside.sum())} of {len(xyz)} SfM points in the box; object share of the mask "
          f"pixels {float(obj.float().mean()):.3f}")
    cmd = (f"gsrender voda --scene out/miku_train/point_cloud.ply --colmap {os.path.relpath(DATA)} "
           f"--masks {out}/masks --missing-masks skip --ignore {IGNORE} --associate --click "
           f"{click[0]} {click[1]} {click[2]} --iters 150 --out {out}/run")
    (out / "command.txt").write_text(cmd + "\n")
    print(cmd)


def figure(out: Path, images: Path, scene: Path) -> Path:
    """Photo / mask (colour = id in that photo) / trained render / removed / extracted, 3 views."""
    import imageio.v3 as iio
    import torch.nn.functional as F

    from gsrender.io import load_ply
    from gsrender.render import rasterize
    from scripts.voda_plant_demo import _mask_rgb, image_grid

    names, vm, K, W, H = _cameras()
    rep = json.loads((out / "run" / "metrics.json").read_text())
    model = load_ply(scene)
    pick = [0, 8, 4]  # the two held-out photos (no mask given) and a training one
    with torch.no_grad():
        full = rasterize(model.means, model.quats, model.scales, model.opacities, model.sh,
                         vm[pick], K[pick], W, H, sh_degree=model.sh_degree).colors.clamp(0, 1)

    def photo(i):
        img = torch.from_numpy(iio.imread(DATA / "images" / names[i])).float().permute(2, 0, 1)
        return F.interpolate(img[None] / 255, size=(H, W), mode="area")[0].permute(1, 2, 0)

    def mask(i):
        sub = "masks_heldout" if i % HOLD == 0 else "masks"
        return _mask_rgb(iio.imread(out / sub / f"{Path(names[i]).stem}.png"))

    run = lambda r, part: iio.imread(out / "run" / part / f"view_{pick[r]:03d}.png")
    cols = (("photo", lambda r: photo(pick[r]).numpy()),
            ("box mask (colour = id; held out: not given)", lambda r: mask(pick[r])),
            ("trained 3DGS", lambda r: full[r].numpy()),
            ("object removed", lambda r: run(r, "removed")),
            ("object extracted", lambda r: run(r, "extracted")))
    path = image_grid(cols, len(pick),
                      f"gsrender voda --colmap on snowmiku_small (real photos; noname0310, MIT): "
                      f"{rep['baseline']}{'+VODA' if rep['voda'] else ''}, {rep['selected']} of "
                      f"{rep['n_gaussians']} Gaussians selected",
                      images / "voda_snowmiku_removal.png", (10, 1.6 * len(pick) + 0.4), 85,
                      ["held out" if i % HOLD == 0 else "masked" for i in pick])
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("masks", "figure"))
    ap.add_argument("--out", type=Path, default=Path("out/voda_miku"))
    ap.add_argument("--scene", type=Path, default=Path("out/miku_train/point_cloud.ply"),
                    help="figure: the trained 3DGS (for the 'trained 3DGS' column)")
    ap.add_argument("--preview", action="store_true",
                    help="masks: also write preview/*.png (SfM points, the in-box ones red)")
    ap.add_argument("--images", type=Path, default=ROOT / "docs" / "images")
    args = ap.parse_args(argv)
    if not DATA.exists():
        print(f"no {DATA}: ../shared/data is absent", file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    if args.step == "masks":
        make_masks(args.out, args.preview)
    else:
        figure(args.out, args.images, args.scene)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
