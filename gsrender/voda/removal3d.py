"""Removal-3D: seeded procedural scenes with ground-truth per-Gaussian object ids for measuring how
much of an object a 3D segmentation actually selects (docs/design.md §7).

A scene is a textured floor and walls stored completely (also under the objects) plus 3-6
objects of one of two structures: "shells", nested shells of gsrender.synthetic.object_blob (the
surface, a sub-surface layer and interior layers: what RGB optimisation leaves behind a
surface's front), or "surface", one opaque surface layer plus Gaussians scattered through the
interior, their share of the object set from a trained 3DGS (PLANT_HIDDEN_SHARE); or, the
composite scene ("plant"), the real trained plant of data/plant as the one object
(voda.composite).
Splits: isolated, touching, occluding, thin. Cameras on hemisphere rings inside the room. Per view:
RGB, instance masks, expected depth; SAM-like noise on the training masks; and an "RGB-optimised"
variant whose object Gaussians are refitted to the images with Adam through gsrender.rasterize.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from gsrender import synthetic as S
from gsrender.render import rasterize
from gsrender.scene import GaussianModel, rgb_to_sh
from gsrender.voda.metrics import dilate, erode, expected_depth

SPLITS = ("isolated", "touching", "occluding", "thin")
# shells of each object: relative size and share of its Gaussians (surface first)
LAYERS = ((1.0, 0.45), (0.8, 0.22), (0.6, 0.16), (0.4, 0.11), (0.2, 0.06))
ROOM = 3.5  # floor half size and wall distance
COVERAGE = 2.0  # tangent-scale factor of the object shells
STRUCTURES = ("shells", "surface", "plant", "plant_full")  # plant: the composite scene
# (voda.composite), decimated to PLANT_GAUSSIANS; plant_full: the same with every Gaussian
# Share of plant.splat's Gaussians (a real trained 3DGS, data/plant) whose summed rendered
# weight over 2 rings of 12 orbit views at 160x120 is near zero (metrics.hidden_share:
# Σw < 1e-3 of the median Σw), measured by studies/voda/removal3d.py --measure-plant (0.0331).
# The "surface" objects put this share of their Gaussians inside the object.
PLANT_HIDDEN_SHARE = 0.033
OPACITY = (0.9, 0.99)  # shell opacities
PALETTE = ((0.85, 0.2, 0.2), (0.2, 0.55, 0.9), (0.95, 0.8, 0.2), (0.3, 0.8, 0.35),
           (0.75, 0.35, 0.85), (0.95, 0.55, 0.2))


@dataclass(frozen=True)
class SceneParams:
    """What the sweeps vary: object structure, shells and their opacity (how blind a rendered
    loss is to the inside), object size, and the camera rig's distance to the objects."""

    structure: str = "shells"
    n_shells: int = len(LAYERS)
    opacity: tuple = OPACITY
    size_scale: float = 1.0
    cam_radius: float = 2.8


@dataclass
class Removal3DScene:
    model: GaussianModel     # object_ids: 0 background, 1..n_objects
    n_objects: int
    split: str
    viewmats: torch.Tensor   # [C,4,4] training views
    Ks: torch.Tensor         # [C,3,3]
    width: int
    height: int
    rgb: torch.Tensor        # [C,H,W,3]
    masks: torch.Tensor      # [C,H,W] long instance ids (clean)
    depth: torch.Tensor      # [C,H,W] expected depth


def shell_sizes(n: int, n_shells: int = len(LAYERS)) -> list[int]:
    """Gaussians per shell of an object of n (surface first): the first n_shells LAYERS shares,
    renormalised."""
    if not 1 <= n_shells <= len(LAYERS):
        raise ValueError(f"n_shells must be in [1, {len(LAYERS)}], got {n_shells}")
    tot = sum(share for _, share in LAYERS[:n_shells])
    return [max(8, round(n * share / tot)) for _, share in LAYERS[:n_shells]]


def _inside(kind: str, p: torch.Tensor, size: float, margin: float = 0.0) -> torch.Tensor:
    """bool [M]: points p [M,3] (centred) inside object_blob(kind, size)'s shape, at least
    `margin` from its surface."""
    if kind == "sphere":
        return p.norm(dim=1) < 0.5 * size - margin
    if kind == "box":
        return p.abs().amax(1) < 0.5 * size - margin
    if kind == "torus":
        ring = p[:, :2].norm(dim=1) - 0.35 * size
        return (ring ** 2 + p[:, 2] ** 2).sqrt() < 0.15 * size - margin
    return (p[:, :2].norm(dim=1) < 0.35 * size - margin) & (p[:, 2].abs() < 0.5 * size - margin)


def interior_gaussians(kind: str, center, size: float, color, object_id: int, n: int,
                       gen: torch.Generator) -> GaussianModel:
    """n small Gaussians scattered uniformly through the inside of a shape (what densification
    leaves inside a trained object: any opacity, never seen past the surface)."""
    pts = torch.zeros(0, 3)
    while pts.shape[0] < n:
        cand = (torch.rand(4 * n + 64, 3, generator=gen) - 0.5) * size
        pts = torch.cat([pts, cand[_inside(kind, cand, size, 0.03 * size)]])  # off the surface
    pts = pts[:n] + torch.tensor(center, dtype=torch.float32)
    radius = 0.25 * size / max(n, 1) ** (1 / 3)  # about a quarter of the mean spacing
    scales = radius * torch.exp(0.3 * torch.randn(n, 3, generator=gen))
    q = F.normalize(torch.randn(n, 4, generator=gen), dim=1)
    rgb = (torch.tensor(color)[None] * (0.7 + 0.3 * torch.rand(n, 1, generator=gen))).clamp(0, 1)
    sh = rgb_to_sh(rgb)[:, None]
    return GaussianModel(means=pts, quats=q, scales=scales.float(),
                         opacities=0.2 + 0.75 * torch.rand(n, generator=gen), sh=sh,
                         object_ids=torch.full((n,), int(object_id), dtype=torch.int64))


def layered_object(kind: str, center, size: float, color, object_id: int, n: int, seed: int,
                   squash: float = 1.0, coverage: float = COVERAGE, structure: str = "shells",
                   n_shells: int = len(LAYERS), opacity=OPACITY,
                   hidden_share: float = PLANT_HIDDEN_SHARE) -> GaussianModel:
    """An object of n Gaussians: nested object_blob shells (structure "shells": shell_sizes,
    surface first) or one surface shell followed by hidden_share·n interior_gaussians ("surface"),
    optionally squashed horizontally about its centre (thin objects: poles, slabs). coverage
    widens the shells' flat Gaussians (tangent scales) so that, as on trained opaque surfaces, a
    ray saturates (T < 1e-4) within a shell; opacity is the shells' opacity range."""
    if structure not in STRUCTURES:
        raise ValueError(f"structure must be one of {STRUCTURES}, got {structure!r}")
    if not 0 <= hidden_share < 1:
        raise ValueError(f"hidden_share must be in [0, 1), got {hidden_share}")
    gen = torch.Generator().manual_seed(seed)
    if structure == "shells":
        rels = [rel for rel, _ in LAYERS[:n_shells]]
        shells = [S.object_blob(kind, center, size * rel, color, object_id, k, generator=gen,
                                opacity_range=opacity)
                  for rel, k in zip(rels, shell_sizes(n, n_shells))]
    else:
        n_in = round(n * hidden_share)
        shells = [S.object_blob(kind, center, size, color, object_id, n - n_in, generator=gen,
                                opacity_range=opacity)]
    m = GaussianModel.cat(shells)
    scales = m.scales.clone()
    scales[:, :2] *= coverage  # object_blob's last axis is the normal: keep the shells thin
    m = replace(m, scales=scales)
    if structure == "surface" and n_in:
        m = GaussianModel.cat([m, interior_gaussians(kind, center, size, color, object_id, n_in,
                                                     gen)])
    if squash != 1.0:
        c = torch.tensor(center, dtype=torch.float32)
        means = m.means.clone()
        means[:, :2] = c[:2] + (means[:, :2] - c[:2]) * squash
        m = replace(m, means=means, scales=m.scales * math.sqrt(squash))
    return m


def placements(split: str, n: int, gen: torch.Generator):
    """(kind, (x, y), size, squash) per object for a split."""
    kinds = [S.OBJECT_KINDS[int(i)] for i in torch.randint(len(S.OBJECT_KINDS), (n,), generator=gen)]
    size = lambda: 0.45 + 0.25 * float(torch.rand(1, generator=gen))
    phase = 2 * math.pi * float(torch.rand(1, generator=gen))
    out = []
    for i, kind in enumerate(kinds):
        s = size()
        if split == "isolated":  # on a circle, gaps of about one object size
            a = phase + 2 * math.pi * i / n
            r = 0.35 * n
            out.append((kind, (r * math.cos(a), r * math.sin(a)), s, 1.0))
        elif split == "touching":  # a row, neighbours in contact
            x = (i - (n - 1) / 2) * 0.62
            out.append((kind, (x, 0.1 * math.sin(3 * i + phase)), 0.62, 1.0))
        elif split == "occluding":  # a tight cluster: objects hide parts of each other
            a = phase + 2 * math.pi * i / n
            r = 0.0 if i == 0 else 0.55
            out.append((kind if i else "cylinder", (r * math.cos(a), r * math.sin(a)),
                        0.8 if i == 0 else 0.45, 1.0))
        elif split == "thin":  # poles and slabs next to regular objects
            a = phase + 2 * math.pi * i / n
            r = 0.3 * n
            thin = i % 2 == 0
            out.append(("cylinder" if thin else kind, (r * math.cos(a), r * math.sin(a)),
                        0.9 if thin else s, 0.25 if thin else 1.0))
        else:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return out


def make_scene_model(split: str, seed: int = 0, n_objects: int | None = None,
                     n_per_object: int = 450, n_floor: int = 1600, n_walls: int = 900,
                     params: SceneParams = SceneParams()):
    """The Gaussians of one Removal-3D scene -> (GaussianModel with object_ids, n_objects)."""
    gen = torch.Generator().manual_seed(seed)
    n = int(torch.randint(3, 7, (1,), generator=gen)) if n_objects is None else int(n_objects)
    if not 1 <= n <= len(PALETTE):
        raise ValueError(f"n_objects must be in [1, {len(PALETTE)}], got {n}")
    parts = [S.ground_plane(n_floor, half_size=ROOM, seed=seed + 1),
             S.walls(n_walls, extent=ROOM, height=2.5, sides=("back", "front", "left", "right"),
                     seed=seed + 2)]
    if params.structure in ("plant", "plant_full"):  # one real trained object in the room
        from gsrender.voda.composite import PLANT_GAUSSIANS, plant_object

        n_plant = PLANT_GAUSSIANS if params.structure == "plant" else None
        parts.append(plant_object((0.0, 0.0, 0.01), 1, seed, n=n_plant,
                                  height=0.7 * params.size_scale))
        return GaussianModel.cat(parts), 1
    for i, (kind, (x, y), size, squash) in enumerate(placements(split, n, gen)):
        size = size * params.size_scale  # the layout stays: a size sweep belongs on "isolated"
        z = S.object_half_height(kind, size) + 0.01
        parts.append(layered_object(kind, (x, y, z), size, PALETTE[i], i + 1, n_per_object,
                                    seed=seed * 101 + i, squash=squash,
                                    structure=params.structure, n_shells=params.n_shells,
                                    opacity=params.opacity))
    return GaussianModel.cat(parts), n


def cameras(width: int = 160, height: int = 120, n_rings: int = 2, per_ring: int = 6,
            offset_deg: float = 0.0, radius: float = 2.8):
    """Views on hemisphere rings of `radius` inside the room, looking at the objects."""
    if not 0 < radius < ROOM:
        raise ValueError(f"radius must be in (0, {ROOM}) (inside the room), got {radius}")
    vm, K = S.hemisphere_rings(n_rings, per_ring, radius=radius, target=(0.0, 0.0, 0.25),
                               width=width, height_px=height, fov_deg=60.0, min_elev_deg=28.0,
                               max_elev_deg=50.0)
    if offset_deg:
        a = math.radians(offset_deg)
        rz = torch.eye(4)
        rz[:2, :2] = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
        vm = vm @ rz.T  # the rig rotated about the world z axis: V·Rz⁻¹
    return vm, K


def instance_masks(model: GaussianModel, n_objects: int, viewmats, Ks, width: int, height: int):
    """[C,H,W] long: the object id dominating each pixel's rendered one-hot identity."""
    onehot = F.one_hot(model.object_ids.long(), n_objects + 1).float()
    with torch.no_grad():
        out = rasterize(model.means, model.quats, model.scales, model.opacities, model.sh,
                        viewmats, Ks, width, height, sh_degree=model.sh_degree, features=onehot)
    return out.features.argmax(-1), out.colors


def render_views(model: GaussianModel, n_objects: int, viewmats, Ks, width: int, height: int):
    masks, rgb = instance_masks(model, n_objects, viewmats, Ks, width, height)
    depth, _ = expected_depth(model, viewmats, Ks, width, height)
    return rgb, masks, depth


def make_removal3d(split: str, seed: int = 0, n_objects: int | None = None, width: int = 160,
                   height: int = 120, n_rings: int = 2, per_ring: int = 6, n_per_object: int = 450,
                   rgb_optimised: bool = False, refit_iters: int = 25,
                   params: SceneParams = SceneParams(), n_floor: int = 1600,
                   n_walls: int = 900) -> Removal3DScene:
    """One Removal-3D scene with its training views rendered (and, for the RGB-optimised variant,
    its object Gaussians refitted to those views)."""
    model, n = make_scene_model(split, seed, n_objects, n_per_object, n_floor, n_walls, params)
    vm, K = cameras(width, height, n_rings, per_ring, radius=params.cam_radius)
    rgb, masks, depth = render_views(model, n, vm, K, width, height)
    if rgb_optimised and not params.structure.startswith("plant"):  # the plant is trained already
        model = refit_objects(model, vm, K, width, height, rgb, refit_iters, seed)
        rgb, masks, depth = render_views(model, n, vm, K, width, height)
    return Removal3DScene(model, n, split, vm, K, width, height, rgb, masks, depth)


def refit_objects(model: GaussianModel, viewmats, Ks, width: int, height: int, images,
                  iters: int = 25, seed: int = 0, lr: float = 0.05) -> GaussianModel:
    """The RGB-optimised variant: object Gaussians start from perturbed colours and half opacity
    and are refitted to `images` [C,H,W,3] with Adam (L1) through gsrender.rasterize, background
    frozen. Like real 3DGS training, the fit is driven by the front Gaussians' weights: the
    surface ends up carrying the image and the layers behind it keep whatever they had."""
    gen = torch.Generator().manual_seed(seed + 7)
    obj = model.object_ids > 0
    n_obj = int(obj.sum())
    op = model.opacities.clone()
    op[obj] = 0.3 + 0.4 * torch.rand(n_obj, generator=gen)
    dc = model.sh[:, 0].clone()
    dc[obj] = dc[obj] + rgb_to_sh(0.5 + 0.15 * torch.randn(n_obj, 3, generator=gen)) * 0.5
    logit = torch.logit(op[obj].clamp(1e-4, 1 - 1e-4)).requires_grad_(True)
    dc_obj = dc[obj].clone().requires_grad_(True)
    opt = torch.optim.Adam([logit, dc_obj], lr=lr)
    idx = torch.nonzero(obj, as_tuple=True)[0]
    for it in range(iters):
        c = it % viewmats.shape[0]
        o = op.index_put((idx,), torch.sigmoid(logit))
        sh = model.sh.clone()
        sh[:, 0] = dc.index_put((idx,), dc_obj)
        out = rasterize(model.means, model.quats, model.scales, o, sh, viewmats[c:c + 1],
                        Ks[c:c + 1], width, height, sh_degree=model.sh_degree)
        loss = (out.colors - images[c:c + 1]).abs().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        sh = model.sh.clone()
        sh[:, 0] = dc.index_put((idx,), dc_obj.detach())
        return replace(model, opacities=op.index_put((idx,), torch.sigmoid(logit.detach())), sh=sh)


def sam_noise(masks: torch.Tensor, seed: int = 0, p_morph: float = 0.6, max_px: int = 2,
              p_hole: float = 0.3, p_merge: float = 0.15) -> torch.Tensor:
    """SAM-like corruption of instance masks [C,H,W] (ids, background 0): per view and object,
    with probability p_morph erode or dilate by 1..max_px px, p_hole punch a hole (a disc set to the
    background id 0), p_merge merge a touching neighbour into the object."""
    gen = torch.Generator().manual_seed(seed)
    out = masks.clone()
    C, H, W = masks.shape
    yy, xx = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    rnd = lambda: float(torch.rand(1, generator=gen))
    for c in range(C):
        for k in torch.unique(masks[c]).tolist():
            if k == 0:
                continue
            m = out[c] == k
            if not m.any():
                continue
            if rnd() < p_merge:
                ring = dilate(m[None], 1)[0] & ~m
                nb = out[c][ring]
                nb = nb[nb > 0]
                if nb.numel():
                    out[c][out[c] == int(nb.mode().values)] = k
                    m = out[c] == k
            if rnd() < p_morph:
                px = 1 + int(torch.randint(max_px, (1,), generator=gen))
                if rnd() < 0.5:
                    out[c][dilate(m[None], px)[0] & ~m] = k
                else:
                    out[c][m & ~erode(m[None], px)[0]] = 0
            if rnd() < p_hole:
                ys, xs = torch.nonzero(out[c] == k, as_tuple=True)
                if ys.numel():
                    j = int(torch.randint(ys.numel(), (1,), generator=gen))
                    r = 2 + 3 * rnd()
                    disc = (yy - ys[j]) ** 2 + (xx - xs[j]) ** 2 <= r * r
                    out[c][disc & (out[c] == k)] = 0
    return out
