"""Feature training on frozen geometry: a baseline's rendered loss, optionally plus VODA.

Geometry is fixed, so each view's projection and tile lists are computed once (FrozenView) and
every iteration only re-rasterizes the per-Gaussian features."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace

import torch

from gsrender import ops
from gsrender.render import rasterize
from gsrender.scene import GaussianModel
from gsrender.voda.baselines import confident, keep_member
from gsrender.voda.clusters import Contributors, depth_contributors, rendered_only
from gsrender.voda.loss import VodaConfig, boundary_weights, voda_loss
from gsrender.voda.raydepth import RayGeometry, ray_clusters, ray_depths

TILE = 16


@dataclass
class FrozenView:
    meta: dict            # rasterize(...).meta of this single view (C = 1)
    labels: torch.Tensor  # [H, W] long training mask ids (-1 unlabelled)
    bweights: torch.Tensor  # [H, W] boundary pixel weights
    width: int
    height: int
    viewmat: torch.Tensor | None = None  # [4, 4] (ray-depth clustering)
    K: torch.Tensor | None = None        # [3, 3]
    geometry: RayGeometry | None = None  # the scene's, shared by its views


def project_views(model: GaussianModel, viewmats, Ks, width: int, height: int) -> list[dict]:
    """One rasterize pass per view (sorted mode) -> its meta (projection and tile lists)."""
    metas = []
    with torch.no_grad():
        for c in range(viewmats.shape[0]):
            out = rasterize(model.means, model.quats, model.scales, model.opacities, model.sh,
                            viewmats[c:c + 1], Ks[c:c + 1], width, height,
                            sh_degree=model.sh_degree, tile_size=TILE)
            metas.append(out.meta)
    return metas


def frozen_views(model: GaussianModel, viewmats, Ks, width: int, height: int, labels: torch.Tensor,
                 cfg: VodaConfig | None = None) -> list[FrozenView]:
    """labels [C,H,W] long: the (noisy) training masks of each view."""
    cfg = cfg or VodaConfig()
    if labels.shape != (viewmats.shape[0], height, width):
        raise ValueError(f"labels must have shape [C,H,W]=({viewmats.shape[0]}, {height}, {width}),"
                         f" got {tuple(labels.shape)}")
    geom = RayGeometry.of(model)
    views = [FrozenView(m, labels[c].long(), None, width, height, viewmats[c], Ks[c], geom)
             for c, m in enumerate(project_views(model, viewmats, Ks, width, height))]
    return with_boundary(views, cfg)


def with_boundary(views: list[FrozenView], cfg: VodaConfig) -> list[FrozenView]:
    """The views with their boundary weights for cfg's boundary settings."""
    labels = torch.stack([v.labels for v in views])
    bw = boundary_weights(labels, cfg.boundary_radius, cfg.boundary_weight, cfg.boundary)
    return [replace(v, bweights=bw[c]) for c, v in enumerate(views)]


def voda_contributors(view: FrozenView, pixels: torch.Tensor, cfg: VodaConfig) -> Contributors:
    """The contributors of pixels [1,P,2] that VODA clusters, by cfg.membership and
    cfg.clustering."""
    c = depth_contributors(view.meta, view.width, view.height, pixels, cfg.K_max, cfg.tau_rel,
                           cfg.tau_abs, TILE)
    if cfg.membership == "rendered":
        c = rendered_only(c)
    if cfg.clustering == "ray":
        if view.geometry is None:
            raise ValueError("clustering='ray' needs the view's camera and geometry (frozen_views)")
        z, sz = ray_depths(view.geometry, view.viewmat, view.K, pixels[0], c.ids[0])
        c = replace(c, clusters=ray_clusters(z, sz, c.valid[0], cfg.span_rel, cfg.extent)[None])
    return c


def render_features(meta: dict, feats: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """Rendered features [C,H,W,D] of per-Gaussian feats [N,D] on frozen geometry
    (differentiable in feats)."""
    C = meta["means2d"].shape[0]
    chans = feats[None].expand(C, *feats.shape).contiguous()  # [C, N, D]
    render = ops.rasterize(meta["means2d"], meta["conics"], meta["opacities"], chans,
                           meta["depths"], None, meta["tile_offsets"], meta["flatten_ids"], width,
                           height, TILE, ops.SORTED, [], "auto")[0]
    return render


@contextlib.contextmanager
def _single_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _sample_pixels(view: FrozenView, n: int, gen: torch.Generator,
                   objects_only: bool = False) -> torch.Tensor:
    """[1,P,2] int32 (x, y) of up to n random labelled pixels (objects_only: of an object, id > 0)."""
    ys, xs = torch.nonzero(view.labels > 0 if objects_only else view.labels >= 0, as_tuple=True)
    pick = torch.randperm(ys.numel(), generator=gen)[:n]
    return torch.stack([xs[pick], ys[pick]], -1).to(torch.int32)[None]


class Streams:
    """One random stream per purpose, so that a baseline and its +VODA run draw the same view
    order and the same 3D-term samples (VODA's pixel samples come from a stream of their own)."""

    def __init__(self, seed: int, n_views: int):
        self.views = torch.Generator().manual_seed(seed)
        self.pixels = torch.Generator().manual_seed(seed + 1_000_003)
        self.knn = torch.Generator().manual_seed(seed + 2_000_003)
        self.n_views = n_views
        self._stack: list[int] = []

    def next_view(self) -> int:
        """Every view once per epoch in a fresh random order (3DGS's viewpoint stack)."""
        if not self._stack:
            self._stack = torch.randperm(self.n_views, generator=self.views).tolist()
        return self._stack.pop()


def train_features(baseline, views: list[FrozenView], iters: int, voda: VodaConfig | None = None,
                   lr: float = 0.02, seed: int = 0, log_every: int = 0, curve_every: int = 0,
                   curve_fn=None) -> dict:
    """Adam on the baseline's parameters for `iters` iterations, one view each (views[i] is the
    baseline's view i). With voda, the VODA loss is added after its warm-up. Returns {"iter_ms":
    mean time of the iterations after the warm-up (all of them if there are no others),
    "losses": [...], "views": the view index of each iteration, "curve": [(iteration,
    curve_fn(baseline)), ...] every curve_every iterations (when given)}; with voda also
    "members": {"rendered": bool [N] given VODA's target at least once as one of the renderer's
    contributors, "past_stop": bool [N] at least once listed after the renderer's stop}."""
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    opt = torch.optim.Adam(baseline.parameters(), lr=lr)
    rng = Streams(seed, len(views))
    warm = (voda or VodaConfig()).warmup
    keep = lambda f, lab: keep_member(baseline, f, lab)
    conf = lambda f, lab: confident(baseline, f, lab)
    times, losses, order, curve = [], [], [], []
    n = baseline.features.shape[0]
    reached = {"rendered": torch.zeros(n, dtype=torch.bool),
               "past_stop": torch.zeros(n, dtype=torch.bool)}
    vol_scale = getattr(baseline, "ce_scale", 1.0) if voda is not None and voda.scale_vol else 1.0
    for it in range(iters):
        t0 = time.perf_counter()
        vi = rng.next_view()
        order.append(vi)
        v = views[vi]
        baseline.set_view(vi)  # view-dependent 2D targets (distillation)
        rendered = render_features(v.meta, baseline.features, v.width, v.height)[0]  # [H,W,D]
        loss = baseline.render_loss(rendered, v.labels)
        if (it + 1) % baseline.reg_every == 0:  # Gaussian Grouping's 3D kNN term, when due
            reg = baseline.regularizer(rng.knn)
            if reg is not None:
                loss = loss + reg
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if voda is not None and it >= voda.warmup:
            # a separate graph (it never touches the render): its gathers and scatters run
            # single-threaded, where torch's CPU index_add is ~100x faster than with threads
            # contending for the same rows
            with _single_thread():
                pix = _sample_pixels(v, voda.n_pixels, rng.pixels, voda.objects_only)
                if pix.shape[1]:
                    contrib = voda_contributors(v, pix, voda)
                    x, y = pix[0, :, 0].long(), pix[0, :, 1].long()
                    lv, info = voda_loss(baseline.features, contrib, v.labels[y, x][None],
                                         baseline.score, baseline.pixel_loss,
                                         v.bweights[y, x][None], voda,
                                         keep_fn=keep if voda.veto else None, confident_fn=conf,
                                         vol_scale=vol_scale)
                    lv.backward()
                    past = info["member_past_stop"]
                    reached["rendered"][info["member_ids"][~past]] = True
                    reached["past_stop"][info["member_ids"][past]] = True
                    loss = loss.detach() + lv.detach()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss.detach()))
        if log_every and (it + 1) % log_every == 0:
            print(f"  it {it + 1}/{iters} loss {losses[-1]:.4f}")
        if curve_fn is not None and curve_every and ((it + 1) % curve_every == 0 or it + 1 == iters):
            curve.append((it + 1, curve_fn(baseline)))
    timed = times[warm:] or times  # the VODA-vs-baseline comparison is after the warm-up
    out = {"iter_ms": 1e3 * sum(timed) / len(timed), "losses": losses, "views": order,
           "curve": curve}
    if voda is not None:
        out["members"] = reached
    return out
