"""Map building end to end: optional MoG split, one pass over the training views for the weight
statistics and the lifting, optional multi-view selection and consistency filtering. The
benchmark's methods are presets of MapConfig (SplitGS-Loc and the ablation baselines)."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

import torch

from gsrender.loc import associate as AS
from gsrender.loc import lift as L
from gsrender.loc import retrieval as RT
from gsrender.loc import select as SEL
from gsrender.loc import split as SP
from gsrender.loc.features import Extractor
from gsrender.loc.stats import DEFAULT_TAU_S, WeightStats
from gsrender.scene import GaussianModel


@dataclass(frozen=True)
class MapConfig:
    split: bool = True
    rho_max: float = SP.DEFAULT_RHO_MAX
    split_levels: int = SP.DEFAULT_LEVELS
    split_k: int = 2
    child_opacity: str = SP.DEFAULT_OPACITY_RULE
    split_normal: bool = False  # split each Gaussian's thinnest axis too
    max_growth: float | None = 2.5  # the split model has at most this many × N Gaussians
    select: bool = True
    min_views: int = SEL.DEFAULT_MIN_VIEWS
    tau_s: float = DEFAULT_TAU_S
    budget: int | None = None
    suppression_radius: float | None = None
    tau_a: float = L.DEFAULT_TAU_A
    top_k: int = 4
    association: str = AS.DEFAULT_ASSOCIATION
    min_consistency: float = L.DEFAULT_MIN_CONSISTENCY
    min_obs: int = 1


# SplitGS-Loc and its one-factor ablations: each differs from "splitgs" in exactly one component
# and shares every other setting, the lifting thresholds included. The opacity-rule presets name
# every rule, so one of them is "splitgs" itself. "all_contributors", "split_normal" and
# "peak_opacity" are the earlier lifting, split axes and opacity rule, one factor each; "legacy"
# is the earlier SplitGS-Loc with all three. "split_only" and "plain" are rungs of the ladder
# from back-projection to the full method (plain: lifting alone; split_only: + split; then
# no_consistency: + selection; splitgs: + consistency filter).
PRESETS = {
    "splitgs": MapConfig(),
    "no_split": MapConfig(split=False),
    "peak_opacity": MapConfig(child_opacity="peak"),
    "density_opacity": MapConfig(child_opacity="density"),
    "image_opacity": MapConfig(child_opacity="image"),
    "split_normal": MapConfig(split_normal=True),
    "all_contributors": MapConfig(association="all"),
    "no_select": MapConfig(select=False),
    "no_consistency": MapConfig(min_consistency=0.0),
    "split_only": MapConfig(select=False, min_consistency=0.0),
    "plain": MapConfig(split=False, select=False, min_consistency=0.0),
    "legacy": MapConfig(association="all", split_normal=True, child_opacity="peak"),
}


# The settings of the split and lifting pass; configs that agree on them share one pass.
_PASS_FIELDS = ("split", "rho_max", "split_levels", "split_k", "child_opacity", "split_normal",
                "max_growth", "tau_s", "tau_a", "top_k", "association")


def build_map(model: GaussianModel, viewmats, Ks, images, width, height,
              extractor: Extractor, config: MapConfig = MapConfig()) -> tuple[L.LiftedMap, dict]:
    """-> (map, info) with info: n_gaussians (after split), n_selected, timings_s per stage,
    associations (keypoints, lifted_keypoints, associations over the training views).
    width/height: ints, or one per view for cameras of different sizes. The map carries the
    retrieval index (views per point, the views' VLAD descriptors)."""
    return build_maps(model, viewmats, Ks, images, width, height, extractor, {"map": config})["map"]


def build_maps(model: GaussianModel, viewmats, Ks, images, width, height, extractor: Extractor,
               configs: dict[str, MapConfig]) -> dict[str, tuple[L.LiftedMap, dict]]:
    """build_map for several configs at once: those with the same split and lifting settings
    (_PASS_FIELDS) share one split + lifting pass and differ only in selection and filtering
    (an ablation of those is then exactly one factor, on the same lifted Gaussians)."""
    groups: dict[tuple, list[str]] = {}
    for name, cfg in configs.items():
        groups.setdefault(tuple(getattr(cfg, f) for f in _PASS_FIELDS), []).append(name)
    out = {}
    base = model
    for names in groups.values():
        config = configs[names[0]]
        t = {}
        t0 = time.perf_counter()
        model, parent = base, torch.arange(base.num_gaussians)
        if config.split:
            model, parent = SP.split_gaussians(
                model, viewmats, Ks, width, height, rho_max=config.rho_max,
                levels=config.split_levels, k=config.split_k, opacity_rule=config.child_opacity,
                split_normal=config.split_normal, max_gaussians=None if config.max_growth is None
                else int(config.max_growth * model.num_gaussians))
        t["split"] = time.perf_counter() - t0
        N = model.num_gaussians
        stats = WeightStats(model.means.new_zeros(N), model.means.new_zeros(N),
                            torch.zeros(N, dtype=torch.int32))
        t1 = time.perf_counter()
        feats, counts = [], {}
        lifted = L.lift_features(model, viewmats, Ks, images, width, height, extractor,
                                 tau_a=config.tau_a, top_k=config.top_k, tau_s=config.tau_s,
                                 stats_out=stats, features_out=feats,
                                 association=config.association, associations_out=counts)
        codebook, view_desc = RT.view_index(feats)
        t["lift"] = time.perf_counter() - t1
        for name in names:
            cfg = configs[name]
            t2 = time.perf_counter()
            keep = None
            if cfg.select:
                keep = SEL.select_gaussians(stats, model.means, min_views=cfg.min_views,
                                            budget=cfg.budget,
                                            suppression_radius=cfg.suppression_radius)
            m = L.finalize_map(model, *lifted, keep=keep, min_consistency=cfg.min_consistency,
                               min_obs=cfg.min_obs, n_views=viewmats.shape[0], parent=parent)
            m.codebook, m.view_descriptors = codebook, view_desc
            tt = {**t, "select_filter": time.perf_counter() - t2}
            tt["total"] = tt["split"] + tt["lift"] + tt["select_filter"]
            out[name] = (m, {"n_gaussians": N, "n_selected": N if keep is None else
                             int(keep.numel()), "map_points": int(m.points.shape[0]),
                             "associations": counts, "timings_s": tt, "config": asdict(cfg)})
    return out


def preset(name: str, **overrides) -> MapConfig:
    if name not in PRESETS:
        raise ValueError(f"method must be one of {tuple(PRESETS)}, got {name!r}")
    return replace(PRESETS[name], **overrides)
