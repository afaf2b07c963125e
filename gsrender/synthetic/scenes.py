"""Labelled scenes of exactly N Gaussians (make_scene) and the Mip-NeRF 360-like presets
(make_preset): ground, walls, dome, clutter and objects, with trained-like statistics."""
from __future__ import annotations

import math
import zlib

import numpy as np
import torch

from gsrender.cameras import check_int, check_positive, normalize, orbit_cameras
from gsrender.scene import GaussianModel
from gsrender.synthetic.gaussians import _check_sh_degree, _generator, _np_rng, _split_counts
from gsrender.synthetic.shapes import (
    OBJECT_KINDS,
    _clutter,
    _dome,
    ground_plane,
    object_blob,
    object_half_height,
    walls,
)
from gsrender.synthetic.textures import _hsv_to_rgb

FEATURE_KINDS = ("object", "random", "smooth")

# ----------------------------------------------------------------------------------------------
# Mip-NeRF 360-like presets
#
# Counts and image sizes (images_4 resolution) are those typical of 3DGS trained at 30k iterations
# on Mip-NeRF 360. Statistics of trained scenes (documented choices, approximate, not fitted):
# - Opacity is U-shaped: many near-transparent Gaussians (opacity reset + pruning at 0.005 leave a
#   large mass just above it) and many near-opaque ones. Mixture of three Beta laws:
#   w_lo·Beta(0.5, 4) + w_mid·Beta(2, 2) + w_hi·Beta(4, 0.4), clipped to [0.005, 0.999].
#   Outdoor scenes (foliage, sky) have a heavier transparent mode than indoor ones.
# - Log-scales: log(surface sample spacing) + N(0, sigma²) per Gaussian (shared by its axes, so the
#   flattening along the normal is kept) + with probability p_tail an Exponential(mean tail) extra
#   (a heavy right tail: the few huge Gaussians of backgrounds and flat regions), the total factor
#   clamped to e^±3. Because the spacing shrinks as 1/sqrt(N), a preset made at scale < 1 keeps
#   roughly the same per-pixel overlap (depth complexity) as the full-size one: fewer but larger
#   Gaussians.
# - SH degree 3 (as trained).
# Layout: "outdoor" = large textured ground, sky/tree-line dome, foliage clusters, 5 objects;
# "indoor" = floor, 4 walls and a ceiling, a little clutter, 5 objects. Cameras: an orbit of 8
# views at ~60° horizontal fov looking at the objects.

_OUT = {"kind": "outdoor", "opacity_mix": (0.40, 0.20, 0.40), "log_scale_sigma": 0.6, "p_tail": 0.05,
        "tail": 0.7, "fov_deg": 60.0}
_IN = {"kind": "indoor", "opacity_mix": (0.30, 0.20, 0.50), "log_scale_sigma": 0.5, "p_tail": 0.03,
       "tail": 0.5, "fov_deg": 65.0}
PRESETS: dict[str, dict] = {
    "bicycle": {"n_gaussians": 6_100_000, "width": 1237, "height": 822, **_OUT},
    "garden": {"n_gaussians": 5_800_000, "width": 1297, "height": 840, **_OUT},
    "stump": {"n_gaussians": 4_900_000, "width": 1245, "height": 825, **_OUT},
    "flowers": {"n_gaussians": 3_600_000, "width": 1256, "height": 828, **_OUT},
    "treehill": {"n_gaussians": 3_800_000, "width": 1267, "height": 832, **_OUT},
    "room": {"n_gaussians": 1_500_000, "width": 1558, "height": 1039, **_IN},
    "counter": {"n_gaussians": 1_200_000, "width": 1558, "height": 1038, **_IN},
    "kitchen": {"n_gaussians": 1_800_000, "width": 1558, "height": 1039, **_IN},
    "bonsai": {"n_gaussians": 1_200_000, "width": 1559, "height": 1039, **_IN},
}

# default (no preset) layout: the small labelled tabletop-like scene of the demo and tests
_LAYOUTS = {
    None: {"ground_half": 4.0, "wall_sides": ("back",), "wall_extent": 4.0, "wall_height": 3.0, "dome": 0.0,
           "clutter": 0.0, "frac_ground": 0.30, "frac_walls": 0.15, "frac_objects": 0.55, "place_radius": 1.5},
    "outdoor": {"ground_half": 10.0, "wall_sides": (), "wall_extent": 0.0, "wall_height": 0.0, "dome": 30.0,
                "clutter": 0.20, "frac_ground": 0.30, "frac_walls": 0.0, "frac_objects": 0.30,
                "place_radius": 1.6},
    "indoor": {"ground_half": 4.0, "wall_sides": ("back", "front", "left", "right", "ceiling"),
               "wall_extent": 4.0, "wall_height": 3.0, "dome": 0.0, "clutter": 0.05, "frac_ground": 0.20,
               "frac_walls": 0.30, "frac_objects": 0.45, "place_radius": 1.5},
}
_DOME_FRAC = 0.20


def _object_specs(n_objects: int, place_radius: float, gen: torch.Generator) -> list[dict]:
    """Kinds, sizes, colours and positions of n non-overlapping objects resting on the ground:
    a sunflower spiral (even spread in a disk) with a random rotation, sizes below the spacing."""
    specs = []
    if n_objects == 0:
        return specs
    perm = torch.randperm(len(OBJECT_KINDS), generator=gen).tolist()
    rot = float(torch.rand(1, generator=gen)) * 2 * math.pi
    hue0 = float(torch.rand(1, generator=gen))
    max_size = min(0.8, 0.75 * place_radius * math.sqrt(math.pi / n_objects))
    golden = math.pi * (3 - math.sqrt(5))
    for k in range(n_objects):
        kind = OBJECT_KINDS[perm[k % len(OBJECT_KINDS)]]
        r = place_radius * math.sqrt((k + 0.5) / n_objects)
        a = rot + k * golden
        size = max_size * (0.7 + 0.3 * float(torch.rand(1, generator=gen)))
        z = object_half_height(kind, size)
        rgb = _hsv_to_rgb((hue0 + k / n_objects) % 1.0, 0.75, 0.9)
        yaw = float(torch.rand(1, generator=gen)) * 360.0
        specs.append({"object_id": k + 1, "kind": kind, "center": [r * math.cos(a), r * math.sin(a), z],
                      "size": size, "color": list(rgb), "yaw_deg": yaw})
    return specs


def _object_area(kind: str, size: float) -> float:
    return {"sphere": math.pi * size ** 2, "box": 6 * size ** 2,
            "torus": 4 * math.pi ** 2 * 0.35 * 0.15 * size ** 2,
            "cylinder": 2 * math.pi * 0.35 * size ** 2 + 2 * math.pi * (0.35 * size) ** 2}[kind]


def _beta_mixture(n: int, weights, params, rng: np.random.Generator) -> np.ndarray:
    comp = rng.choice(len(weights), size=n, p=np.asarray(weights) / np.sum(weights))
    out = np.empty(n)
    for i, (a, b) in enumerate(params):
        m = comp == i
        out[m] = rng.beta(a, b, size=int(m.sum()))
    return out


def _apply_trained_stats(model: GaussianModel, spec: dict, gen: torch.Generator) -> GaussianModel:
    n = model.num_gaussians
    rng = _np_rng(gen)
    op = _beta_mixture(n, spec["opacity_mix"], [(0.5, 4.0), (2.0, 2.0), (4.0, 0.4)], rng)
    model.opacities = torch.from_numpy(np.clip(op, 0.005, 0.999)).float()
    log_f = torch.randn(n, generator=gen) * spec["log_scale_sigma"]
    tail = torch.empty(n).exponential_(1.0 / spec["tail"], generator=gen)
    log_f = log_f + torch.where(torch.rand(n, generator=gen) < spec["p_tail"], tail, torch.zeros(n))
    # bounded to ×/÷ e^3 ≈ 20: 3DGS densification splits anything much larger than the scene scale
    log_f = log_f.clamp(-3.0, 3.0)
    model.scales = model.scales * log_f.exp()[:, None]
    return model


def _features(model: GaussianModel, kind: str, dim: int, n_objects: int, gen: torch.Generator) -> torch.Tensor:
    n = model.num_gaussians
    if kind == "object":
        # one random unit embedding per id, id 0 the background, + small iid noise (not renormalised)
        emb = normalize(torch.randn(n_objects + 1, dim, generator=gen))
        return emb[model.object_ids] + 0.05 * torch.randn(n, dim, generator=gen)
    if kind == "random":
        return torch.randn(n, dim, generator=gen) / math.sqrt(dim)  # iid, rows of norm ≈ 1
    # smooth: random Fourier features of position (wavelengths ~2-6 world units), values in [-1, 1]
    w = torch.randn(3, dim, generator=gen) * 1.5
    b = torch.rand(dim, generator=gen) * 2 * math.pi
    return torch.sin(model.means @ w + b)


def make_scene(n_gaussians: int, n_objects: int = 5, seed: int = 0, sh_degree: int = 0, feature_dim: int = 0,
               feature_kind: str = "object", preset: str | None = None) -> GaussianModel:
    """A labelled scene of exactly n_gaussians Gaussians.

    Default layout: textured ground [-4,4]^2 at z=0, a textured back wall at y=+4, and n_objects
    shapes (cycling sphere/box/torus/cylinder) resting on the ground within 1.5 of the origin.
    object_ids: 0 = background, 1..n_objects = objects. features [N, feature_dim] when
    feature_dim > 0 ("object": per-object random unit embedding + noise 0.05; "random": iid
    N(0, 1/D); "smooth": sin of random linear functions of position). preset: a PRESETS name;
    uses its layout (outdoor/indoor) and trained-like opacity/scale statistics (see PRESETS).
    meta holds the object specs ("objects": id, kind, center, size, color, yaw_deg), "seed",
    "preset".
    """
    n_gaussians = check_int(n_gaussians, "n_gaussians")
    n_objects = check_int(n_objects, "n_objects", 0)
    if n_objects > 255:
        raise ValueError(f"n_objects: at most 255, got {n_objects}")
    sh_degree = _check_sh_degree(sh_degree)
    feature_dim = check_int(feature_dim, "feature_dim", 0)
    if feature_kind not in FEATURE_KINDS:
        raise ValueError(f"feature_kind: expected one of {FEATURE_KINDS}, got {feature_kind!r}")
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"preset: expected one of {sorted(PRESETS)} or None, got {preset!r}")
    spec = PRESETS[preset] if preset is not None else None
    lay = _LAYOUTS[spec["kind"] if spec else None]
    seed = check_int(seed, "seed", 0)
    # presets of equal size must still differ: mix a stable hash of the name into the seed
    gen = _generator(seed if preset is None else seed ^ zlib.crc32(preset.encode()), None)

    objs = _object_specs(n_objects, lay["place_radius"], gen)
    frac_obj = lay["frac_objects"] if objs else 0.0
    parts_w = [lay["frac_ground"], lay["frac_walls"], _DOME_FRAC if lay["dome"] else 0.0, lay["clutter"],
               frac_obj]
    n_ground, n_walls, n_dome, n_clutter, n_obj = _split_counts(n_gaussians, parts_w)
    obj_counts = _split_counts(n_obj, [_object_area(o["kind"], o["size"]) for o in objs])

    parts = [ground_plane(n_ground, half_size=lay["ground_half"], sh_degree=sh_degree, generator=gen)]
    if lay["wall_sides"]:
        parts.append(walls(n_walls, extent=lay["wall_extent"], height=lay["wall_height"],
                           sides=lay["wall_sides"], sh_degree=sh_degree, generator=gen))
    if lay["dome"]:
        parts.append(_dome(n_dome, lay["dome"], sh_degree, gen))
    if lay["clutter"]:
        outdoor = spec["kind"] == "outdoor"
        # rings outside the preset camera orbits (radius 4 / 2.8) so nothing blocks the views
        if outdoor:
            parts.append(_clutter(n_clutter, 40, 5.5, 9.0, 3.0, 0.6, True, sh_degree, gen))
        else:
            parts.append(_clutter(n_clutter, 12, 3.4, 3.75, 1.5, 0.15, False, sh_degree, gen))
    for o, k in zip(objs, obj_counts):
        parts.append(object_blob(o["kind"], o["center"], o["size"], o["color"], o["object_id"], k,
                                 sh_degree=sh_degree, yaw_deg=o["yaw_deg"], generator=gen))
    model = GaussianModel.cat(parts)
    if spec is not None:
        model = _apply_trained_stats(model, spec, gen)
    if feature_dim > 0:
        model.features = _features(model, feature_kind, feature_dim, n_objects, gen).float()
    model.meta = {"objects": objs, "seed": int(seed), "preset": preset, "world_up": "+z"}
    return model


def make_preset(name: str, scale: float = 1.0, seed: int = 0, sh_degree: int = 3, feature_dim: int = 0,
                feature_kind: str = "object", n_views: int = 8):
    """A Mip-NeRF 360-like scene: (GaussianModel, viewmats [V,4,4], Ks [V,3,3], width, height).

    scale multiplies the preset's Gaussian count (N = max(1, round(n_gaussians·scale))); image size
    stays the preset's. Cameras: an orbit of n_views around the objects (radius 4, 1.6 above the
    target outdoors; radius 2.8, 1.2 above indoors, inside the room)."""
    if name not in PRESETS:
        raise ValueError(f"name: expected one of {sorted(PRESETS)}, got {name!r}")
    scale = check_positive(scale, "scale")
    spec = PRESETS[name]
    n = max(1, round(spec["n_gaussians"] * scale))
    model = make_scene(n, n_objects=5, seed=seed, sh_degree=sh_degree, feature_dim=feature_dim,
                       feature_kind=feature_kind, preset=name)
    radius, height = (4.0, 1.6) if spec["kind"] == "outdoor" else (2.8, 1.2)
    vms, ks = orbit_cameras(n_views, radius, height, target=(0.0, 0.0, 0.3), width=spec["width"],
                            height_px=spec["height"], fov_deg=spec["fov_deg"], start_deg=15.0)
    return model, vms, ks, spec["width"], spec["height"]

