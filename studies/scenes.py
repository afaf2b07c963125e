"""The application studies' trained-model scenes (studies/voda, studies/loc): a ground-truth room
with per-Gaussian object ids, rendered on a dense rig, and a 3DGS trained from those images with
the project's trainer (gsrender.train), cached on disk.

The methods under study (3D segmentation, localization) see only the *trained* model, the
training images, their poses and the (noisy) 2D masks; ground truth comes from the ground-truth
scene: rendered label maps, the depth of the scene rendered without an object, the poses.

Outside the package because it uses the applications (gsrender.voda, gsrender.loc) and the trainer,
which the library's gsrender.synthetic must not depend on. API (everything float32 on the CPU,
+z up as in gsrender.synthetic):

    ts = load_or_train(size="quick" | "full", seed=0, split="isolated", root="out/trained_scenes")
    ts.gt            GaussianModel with object_ids (0 background, 1..n_objects; object n_objects is
                     the real plant of data/plant/plant.splat (bundled), decimated per SIZES)
    ts.model         the trained 3DGS (GaussianModel); its object_ids are *derived*: the id of the
                     nearest ground-truth Gaussian centre (for reporting and Gaussian-level scores)
    ts.train / ts.test   Views: viewmats [C,4,4], Ks [C,3,3], rgb [C,H,W,3] (ground-truth images),
                     labels [C,H,W] long (rendered ground-truth object ids), depth / alpha [C,H,W]
                     (expected depth of the ground-truth scene)
    ts.width, ts.height, ts.n_objects, ts.split, ts.seed, ts.size
    ts.noisy_labels(seed)      SAM-like noisy training masks (gsrender.voda.removal3d.sam_noise)
    ts.removal_depth(k, views) (ED, alpha) of the ground-truth scene without object k
    ts.report        the JSON report: PSNR (train / held-out), Gaussians per object, hidden share
                     per object, coverage, timings, config

Hidden share (one definition, gsrender.voda.metrics.hidden_mask): a Gaussian is hidden when its
compositing weight summed over every pixel of the training views is below HIDDEN_REL (1e-3) times
the median Gaussian's. Reported for the trained model per derived object.

Coverage: a ground-truth Gaussian is "seen" in a view when its largest compositing weight there
exceeds SEEN_WEIGHT; the report gives, of the Gaussians seen at all, the share seen in >= 3
training views (the rig's design target), overall and for floor / walls / objects.

Sizes (SIZES): "full" is the documented study size (100 training views at 320x240); "small"
100 training views at 128x96 with a lighter room and schedule (what a shared 2-core machine
evaluates); "quick" the CI size (trains in seconds); "headroom" the small rig with a Regime
(noisy init with floaters, view-dependent ground truth, solid objects, a Gaussian cap ~5x
the ground truth's count and a 3,000-step schedule). The cache folder is
<root>/<size>_<split>_<seed>/ holding point_cloud.ply (the trained model), cameras_train.json /
cameras_test.json (gsrender.cameras.cameras_from_json) and report.json; the ground truth and its
renders are regenerated from the seed (deterministic) when loaded.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from gsrender import synthetic as S
from gsrender.cameras import cameras_to_json
from gsrender.io import atomic
from gsrender.scene import GaussianModel, sh_to_rgb

SEEN_WEIGHT = 0.05  # a Gaussian with a compositing weight above this in a view is seen there
ROOM = 3.5          # floor half size and wall distance (as the hand-built Removal-3D rooms)
WALL_HEIGHT = 2.5
TARGET = (0.0, 0.0, 0.25)


@dataclass(frozen=True)
class SceneSize:
    """Everything a size fixes: image size, rig, ground-truth density and training budget."""

    width: int
    height: int
    rings: int            # training rig: rings x per_ring views on a hemisphere
    per_ring: int
    n_test: int           # held-out views on a ring between the training rings, rotated
    radius: float         # rig radius around TARGET (inside the room)
    n_objects: int        # objects in the room (the last one is the plant)
    n_floor: int          # ground-truth Gaussians
    n_walls: int
    per_object: int
    plant: int            # plant.splat Gaussians kept (decimated by a seeded subset)
    init_points: int      # "SfM" points the training starts from (seen in >= 2 training views)
    steps: int            # training budget in views (3DGS iterations)
    max_gaussians: int
    sh_degree: int = 1    # the ground truth is view-independent: degree 1 leaves room, costs less


SIZES = {
    # CI: seconds of training; too coarse for results
    "quick": SceneSize(width=96, height=72, rings=2, per_ring=10, n_test=4, radius=2.8,
                       n_objects=2, n_floor=1500, n_walls=1200, per_object=400, plant=1500,
                       init_points=1000, steps=300, max_gaussians=8000),
    # what a 2-core machine shared with other jobs can evaluate in about an hour: the study's
    # 100-view rig at 128x96, a lighter room, a shorter schedule
    "small": SceneSize(width=128, height=96, rings=4, per_ring=25, n_test=8, radius=2.8,
                       n_objects=3, n_floor=3000, n_walls=2400, per_object=800, plant=3000,
                       init_points=2000, steps=600, max_gaussians=12000),
    # the study size: 100 training views at 320x240, 8 held out; a schedule of 2,000 steps
    # (20 epochs) and at most 40k Gaussians, so that a study of 10 scenes trains and evaluates in
    # about 2 h on 2 quiet cores
    "full": SceneSize(width=320, height=240, rings=4, per_ring=25, n_test=8, radius=2.8,
                      n_objects=3, n_floor=12000, n_walls=9000, per_object=2500, plant=12000,
                      init_points=8000, steps=2000, max_gaussians=40000),
}


@dataclass(frozen=True)
class Regime:
    """What makes a trained scene carry the weakly supervised Gaussians real 3DGS training leaves
    (noisy SfM, floaters, view-dependent layers, solid objects), which the other sizes lack by
    construction (ground-truth centres jittered by 1 cm, view-independent surface shells): the
    regime with headroom for a method that reaches hidden Gaussians."""

    init_jitter: float = 0.05   # m: the "SfM" points' error (the other sizes: 0.01)
    floaters: float = 0.2       # share of the init points drawn uniformly in the room instead
    gt_sh_degree: int = 3       # view-dependent ground truth
    gt_sh_std: float = 0.15     # std of its higher-order SH coefficients
    interior_share: float = 0.5  # share of a synthetic object's Gaussians filling its inside


# sizes whose scenes follow a Regime (the others: today's construction)
REGIMES = {"headroom": Regime()}
SIZES["headroom"] = replace(SIZES["small"], init_points=4000, steps=3000, max_gaussians=48000,
                            sh_degree=3)  # ~5x the ground truth's 10,000 Gaussians, 30 epochs
TRAIN_LR_SCALE = 2.0  # gsrender train's default for short budgets
ELEVATIONS = (15.0, 60.0)  # training rings' elevation range (deg); held-out ring in between


@dataclass
class Views:
    viewmats: torch.Tensor  # [C,4,4]
    Ks: torch.Tensor        # [C,3,3]
    rgb: torch.Tensor       # [C,H,W,3] ground-truth images
    labels: torch.Tensor    # [C,H,W] long ground-truth object ids, 0 is the background
    depth: torch.Tensor     # [C,H,W] expected depth of the ground-truth scene
    alpha: torch.Tensor     # [C,H,W]

    def __len__(self) -> int:
        return int(self.viewmats.shape[0])


@dataclass
class TrainedScene:
    size: str
    seed: int
    split: str
    gt: GaussianModel
    n_objects: int
    model: GaussianModel
    train: Views
    test: Views
    width: int
    height: int
    report: dict

    def noisy_labels(self, seed: int) -> torch.Tensor:
        """[C,H,W] SAM-like noisy training masks (erode/dilate, holes, merges)."""
        from gsrender.voda.removal3d import sam_noise

        return sam_noise(self.train.labels, seed)

    def removal_depth(self, object_id: int, views: Views | None = None):
        """(ED, alpha) [C,H,W] of the ground-truth scene without object `object_id` on `views`
        (the held-out views by default)."""
        from gsrender.voda.metrics import expected_depth

        if not 1 <= object_id <= self.n_objects:
            raise ValueError(f"object_id must be in [1, {self.n_objects}], got {object_id}")
        v = self.test if views is None else views
        return expected_depth(self.gt.subset(self.gt.object_ids != object_id), v.viewmats, v.Ks,
                              self.width, self.height)


def _check_size(size: str) -> SceneSize:
    if size not in SIZES:
        raise ValueError(f"size must be one of {tuple(SIZES)}, got {size!r}")
    return SIZES[size]


def ground_truth(size: str, seed: int, split: str = "isolated") -> tuple[GaussianModel, int]:
    """The ground-truth room: textured floor and 4 walls, n_objects objects placed as the split's
    layout (gsrender.voda.removal3d.placements), the last one the real plant. Each synthetic
    object is one opaque surface shell (what images constrain; nothing inside)."""
    from gsrender.voda.composite import plant_object
    from gsrender.voda.removal3d import PALETTE, layered_object, placements

    sz = _check_size(size)
    regime = REGIMES.get(size)
    interior = 0.0 if regime is None else regime.interior_share
    gen = torch.Generator().manual_seed(seed)
    parts = [S.ground_plane(sz.n_floor, half_size=ROOM, seed=seed + 1),
             S.walls(sz.n_walls, extent=ROOM, height=WALL_HEIGHT,
                     sides=("back", "front", "left", "right"), seed=seed + 2)]
    n = sz.n_objects
    for i, (kind, (x, y), s, squash) in enumerate(placements(split, n, gen)):
        if i == n - 1:
            parts.append(plant_object((x, y, 0.01), i + 1, seed, n=sz.plant, height=max(s, 0.6)))
            continue
        z = S.object_half_height(kind, s) + 0.01
        parts.append(layered_object(kind, (x, y, z), s, PALETTE[i], i + 1, sz.per_object,
                                    seed=seed * 101 + i, squash=squash, structure="surface",
                                    hidden_share=interior))
    gt = GaussianModel.cat(parts)
    if regime is not None:
        gt = view_dependent(gt, regime.gt_sh_degree, regime.gt_sh_std, seed)
    return gt, n


def view_dependent(gt: GaussianModel, degree: int, std: float, seed: int) -> GaussianModel:
    """The ground truth with SH up to `degree`: its coefficients kept, the bands above them drawn
    from N(0, std²) (colours that change with the viewing direction, as real surfaces' do)."""
    gen = torch.Generator().manual_seed(seed + 5)
    K = (degree + 1) ** 2
    sh = torch.randn(gt.num_gaussians, K, 3, generator=gen) * std
    sh[:, :gt.sh.shape[1]] = gt.sh
    return replace(gt, sh=sh)


def rig(size: str, seed: int = 0):
    """(train viewmats, Ks), (held-out viewmats, Ks): training rings over ELEVATIONS, the held-out
    ring at the middle elevation rotated by half a training step plus a seeded offset."""
    sz = _check_size(size)
    vm, K = S.hemisphere_rings(sz.rings, sz.per_ring, radius=sz.radius, target=TARGET,
                               width=sz.width, height_px=sz.height, fov_deg=60.0,
                               min_elev_deg=ELEVATIONS[0], max_elev_deg=ELEVATIONS[1])
    mid = 0.5 * (ELEVATIONS[0] + ELEVATIONS[1]) + 3.0  # between two training rings
    tv, tk = S.hemisphere_rings(1, sz.n_test, radius=sz.radius, target=TARGET, width=sz.width,
                                height_px=sz.height, fov_deg=60.0, min_elev_deg=mid,
                                max_elev_deg=mid)
    a = math.radians(180.0 / sz.per_ring + 7.0 * (seed % 5))  # off the training azimuths
    rz = torch.eye(4)
    rz[:2, :2] = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return (vm, K), (tv @ rz.T, tk)


def render_views(gt: GaussianModel, n_objects: int, viewmats, Ks, width: int, height: int) -> Views:
    """Ground-truth images, label maps and expected depth on a black background."""
    from gsrender.voda.metrics import expected_depth
    from gsrender.voda.removal3d import instance_masks

    labels, rgb = [], []
    for c in range(viewmats.shape[0]):  # one view at a time: bounded memory at 320x240
        lab, col = instance_masks(gt, n_objects, viewmats[c:c + 1], Ks[c:c + 1], width, height)
        labels.append(lab)
        rgb.append(col.clamp(0, 1))
    depth, alpha = expected_depth(gt, viewmats, Ks, width, height)
    return Views(viewmats, Ks, torch.cat(rgb), torch.cat(labels), depth, alpha)


def views_seen(gt: GaussianModel, viewmats, Ks, width: int, height: int) -> torch.Tensor:
    """[N] int32: per ground-truth Gaussian, the views in which it is seen (its largest
    compositing weight there exceeds SEEN_WEIGHT)."""
    from gsrender.loc.stats import weight_stats

    return weight_stats(gt, viewmats, Ks, width, height, tau_s=SEEN_WEIGHT).n_views


def coverage(gt: GaussianModel, nv: torch.Tensor) -> dict:
    """Of the ground-truth Gaussians seen in some view (nv: views_seen), the share seen in >= 3
    and >= 2 views, overall and per part (floor, walls, objects)."""
    wall = (gt.object_ids == 0) & (gt.means[:, 2] > 1e-3)
    parts = {"all": torch.ones_like(wall), "floor": (gt.object_ids == 0) & ~wall, "walls": wall,
             "objects": gt.object_ids > 0}
    out = {}
    for name, m in parts.items():
        seen = m & (nv >= 1)
        k = max(int(seen.sum()), 1)
        out[name] = {"seen": int(seen.sum()), "of": int(m.sum()),
                     "share_ge3": float((seen & (nv >= 3)).sum()) / k,
                     "share_ge2": float((seen & (nv >= 2)).sum()) / k}
    return out


def init_points(gt: GaussianModel, views_seen: torch.Tensor, n: int, seed: int,
                regime: Regime | None = None):
    """"SfM" points as a structure-from-motion run would triangulate them: n centres of
    ground-truth Gaussians seen in >= 2 training views, jittered by 1 cm, with their colours.
    With a regime: jittered by regime.init_jitter, and a regime.floaters share of them replaced
    by points drawn uniformly in the room with random colours."""
    gen = torch.Generator().manual_seed(seed + 3)
    cand = torch.nonzero(views_seen >= 2, as_tuple=True)[0]
    pick = cand[torch.randperm(cand.numel(), generator=gen)[:n]]
    jitter = 0.01 if regime is None else regime.init_jitter
    xyz = gt.means[pick] + jitter * torch.randn(pick.numel(), 3, generator=gen)
    rgb = (sh_to_rgb(gt.sh[pick, 0]).clamp(0, 1) * 255).round().to(torch.uint8)
    if regime is not None:
        m = int(regime.floaters * pick.numel())
        lo, hi = torch.tensor([-ROOM, -ROOM, 0.0]), torch.tensor([ROOM, ROOM, WALL_HEIGHT])
        xyz[:m] = lo + (hi - lo) * torch.rand(m, 3, generator=gen)
        rgb[:m] = torch.randint(0, 256, (m, 3), generator=gen, dtype=torch.uint8)
    return xyz, rgb


def nearest_ids(points: torch.Tensor, ref: GaussianModel, chunk: int = 2048) -> torch.Tensor:
    """[P] int64: the object id of the nearest ref Gaussian centre to each point."""
    idx = torch.cat([torch.cdist(points[s:s + chunk], ref.means).argmin(1)
                     for s in range(0, points.shape[0], chunk)])
    return ref.object_ids[idx]


def object_report(model: GaussianModel, n_objects: int, train: Views, width: int,
                  height: int) -> dict:
    """Gaussians and hidden share (training views) per derived object id, and overall."""
    from gsrender.loc.stats import weight_stats
    from gsrender.voda.metrics import hidden_mask

    w = weight_stats(model, train.viewmats, train.Ks, width, height).w_sum
    hid = hidden_mask(w)
    out = {"all": {"gaussians": model.num_gaussians, "hidden_share": float(hid.float().mean())}}
    for k in range(n_objects + 1):
        m = model.object_ids == k
        out["background" if k == 0 else f"object_{k}"] = {
            "gaussians": int(m.sum()),
            "hidden_share": float(hid[m].float().mean()) if m.any() else 0.0}
    return out


def _train_config(sz: SceneSize, seed: int):
    from gsrender.train import DensifyConfig, LearningRates, TrainConfig

    return TrainConfig(steps=sz.steps, sh_degree=sz.sh_degree, background="black",
                       lrs=LearningRates().scaled(TRAIN_LR_SCALE),
                       densify=DensifyConfig(max_gaussians=sz.max_gaussians), seed=seed)


def train_model(gt: GaussianModel, seen: torch.Tensor, train: Views, test: Views, sz: SceneSize,
                seed: int, progress: bool = False,
                regime: Regime | None = None) -> tuple[GaussianModel, dict]:
    """3DGS trained from the training images (gsrender.train.Trainer, the standard schedule:
    densification over the first half, position LR decay, SH warm-up), starting from
    init_points of the Gaussians `seen` (views_seen) -> (model, report)."""
    from tqdm import tqdm

    from gsrender.train import Trainer, View, camera_extent, to_model

    views = [View(f"train_{c:03d}", train.viewmats[c], train.Ks[c], train.rgb[c])
             for c in range(len(train))]
    held = [View(f"test_{c:03d}", test.viewmats[c], test.Ks[c], test.rgb[c])
            for c in range(len(test))]
    xyz, rgb = init_points(gt, seen, sz.init_points, seed, regime)
    cfg = _train_config(sz, seed)
    tr = Trainer.from_points(xyz, rgb, camera_extent(list(train.viewmats)), cfg)
    t0, cpu0 = time.perf_counter(), time.process_time()
    bar = tqdm(total=tr.sched.steps, disable=not progress, unit="step", dynamic_ncols=True,
               desc="train 3DGS")
    while not tr.done():
        r = tr.train_step(views)
        bar.update(1)
        bar.set_postfix(psnr=f"{r['psnr']:.1f}", N=r["n"], refresh=False)
    bar.close()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    ev = tr.evaluate(held)
    rep = {"steps": tr.step_count, "train_seconds": tr.train_seconds, "wall_seconds": wall,
           "cpu_seconds": cpu, "gaussians_initial": int(xyz.shape[0]),
           "gaussians_final": tr.num_gaussians, "psnr_train": tr.evaluate(views)["psnr"],
           "psnr_test": ev["psnr"], "ssim_test": ev["ssim"], "threads": torch.get_num_threads()}
    return to_model(tr.params), rep


def config(size: str) -> dict:
    """What a cached scene of `size` was built with (its report's "config")."""
    sz = asdict(_check_size(size))
    return sz if size not in REGIMES else {**sz, "regime": asdict(REGIMES[size])}


def _folder(root, size: str, split: str, seed: int) -> Path:
    return Path(root) / f"{size}_{split}_{seed}"


def load_or_train(size: str = "quick", seed: int = 0, split: str = "isolated",
                  root: str | Path = "out/trained_scenes", progress: bool = False,
                  retrain: bool = False) -> TrainedScene:
    """The trained scene of (size, split, seed): loaded from <root>/<size>_<split>_<seed>/ when
    cached there (and not retrain), else built, trained and cached."""
    from gsrender.io.ply import load_ply, save_ply

    sz = _check_size(size)
    gt, n = ground_truth(size, seed, split)
    (tvm, tK), (hvm, hK) = rig(size, seed)
    train = render_views(gt, n, tvm, tK, sz.width, sz.height)
    test = render_views(gt, n, hvm, hK, sz.width, sz.height)
    folder = _folder(root, size, split, seed)
    ply, rep_path = folder / "point_cloud.ply", folder / "report.json"
    if ply.exists() and rep_path.exists() and not retrain:
        report = json.loads(rep_path.read_text())
        if report.get("config") != config(size):
            raise ValueError(f"root: {folder} was trained with another {size!r} size; "
                             "pass retrain=True or another root")
        model = load_ply(ply)
        model = replace(model, object_ids=nearest_ids(model.means, gt))
        return TrainedScene(size, seed, split, gt, n, model, train, test, sz.width, sz.height,
                            report)
    seen = views_seen(gt, tvm, tK, sz.width, sz.height)
    model, rep = train_model(gt, seen, train, test, sz, seed, progress, REGIMES.get(size))
    model = replace(model, object_ids=nearest_ids(model.means, gt))
    report = {"size": size, "seed": seed, "split": split, "config": config(size),
              "training": rep, "views": {"train": len(train), "test": len(test)},
              "coverage": coverage(gt, seen),
              "gt_gaussians": {"all": gt.num_gaussians,
                               **{f"object_{k}": int((gt.object_ids == k).sum())
                                  for k in range(1, n + 1)}},
              "trained": object_report(model, n, train, sz.width, sz.height)}
    folder.mkdir(parents=True, exist_ok=True)
    save_ply(ply, replace(model, object_ids=None))
    (folder / "cameras_train.json").write_text(cameras_to_json(tvm, tK, sz.width, sz.height))
    (folder / "cameras_test.json").write_text(cameras_to_json(hvm, hK, sz.width, sz.height))
    atomic.write_text(rep_path, json.dumps(report, indent=1))
    return TrainedScene(size, seed, split, gt, n, model, train, test, sz.width, sz.height, report)
