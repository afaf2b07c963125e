"""The trainer over torch.distributed ranks (`torchrun ... -m gsrender train --distributed`).

Every rank holds a round-robin shard of the Gaussians with its own Adam state and densification
statistics. A step's batch of batch_views × world views (the same batch, drawn on every rank) is
split over the ranks, batch_views each, and rendered with gsrender.distributed.rasterize; each
rank's loss is divided by `world`, so the gradient is the mean over the step's views: the step
is the one process's step with batch_views × world views (Trainer), learning-rate scaling and
step schedules included. Densification and pruning run per shard, on the same decisions and
draws as one process: the Gaussians' ids key the split noise, max_gaussians caps all shards
together (densify_and_prune's gather); the checkpoint is one PLY of all shards gathered by rank 0.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from gsrender import distributed as D
from gsrender import metrics
from gsrender.render import RenderOutput
from gsrender.scene import GaussianModel
from gsrender.train.data import View, batch_lens
from gsrender.train.params import NAMES, activated, to_model
from gsrender.train.trainer import TrainConfig, Trainer


class DistributedTrainer(Trainer):
    def __init__(self, params: dict[str, torch.Tensor], extent: float, cfg: TrainConfig, group=None):
        self.group = group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        shard = {k: params[k][self.rank::self.world].clone() for k in NAMES}
        ids = torch.arange(params["means"].shape[0], device=params["means"].device)
        super().__init__(shard, extent, cfg, ids=ids[self.rank::self.world])
        # each Gaussian's position in one process's list: the render's order at equal depths
        # (SfM points repeat: snowmiku has 572 duplicates), kept by densification
        self.order = self.ids.clone()

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def total_gaussians(self) -> int:
        n = torch.tensor([self.num_gaussians], device=self.device)
        dist.all_reduce(n, group=self.group)
        return int(n)

    def _gather(self, t: torch.Tensor) -> torch.Tensor:
        """t concatenated over the ranks, in rank order (collective)."""
        return torch.cat(D.all_gather_rows(t, self.group))

    def model(self) -> GaussianModel:
        """All shards as one model, in one process's order, on every rank (collective)."""
        rows = self._gather(self.order).argsort()
        return to_model({k: self._gather(self.params[k].detach())[rows] for k in NAMES})

    def render(self, views: list[View], background: torch.Tensor | None = None,
               sh_degree: int | None = None) -> RenderOutput:
        """Renders this rank's views (collective: every rank renders at least one view)."""
        means, quats, scales, opac, sh = activated(self.params)
        deg = self.active_sh_degree() if sh_degree is None else sh_degree
        bg = self._background(train=False) if background is None else background
        return D.rasterize(means, quats, scales, opac, sh, torch.stack([v.viewmat for v in views]),
                           torch.stack([v.K for v in views]), views[0].width, views[0].height,
                           sh_degree=deg, backgrounds=bg, order=self.order, group=self.group,
                           **batch_lens(views))

    def _densify_if_due(self, densifying: bool) -> dict | None:
        """Densifies this shard; the event (also in self.log) counts all shards (collective:
        every rank densifies at the same steps)."""
        event = super()._densify_if_due(densifying)
        if event is not None:
            keys = [k for k in event if k != "step"]
            n = torch.tensor([event[k] for k in keys], device=self.device)
            dist.all_reduce(n, group=self.group)
            event.update(zip(keys, (int(v) for v in n.tolist())))
        return event

    def train_step(self, views: list[View]) -> dict:
        r = super().train_step(views)
        # the time budget and the schedules read train_seconds: keep every rank on the slowest's
        t = torch.tensor([self.train_seconds], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        self.train_seconds = float(t)
        return r

    @torch.no_grad()
    def evaluate(self, views: list[View]) -> dict:
        """Mean PSNR / SSIM over views (the same list on every rank), `world` views at a time;
        in a last, partial round the ranks without a view render the round's first one unused."""
        if not views:
            return {"psnr": None, "ssim": None, "views": 0}
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)
        for i in range(0, len(views), self.world):
            mine = i + self.rank < len(views)
            v = views[i + self.rank] if mine else views[i]
            img = self.render([v]).colors.clamp(0, 1)
            if mine:
                sums += torch.tensor([metrics.psnr(img, v.image[None]),
                                      float(metrics.ssim(img, v.image[None]))], dtype=sums.dtype,
                                     device=sums.device)
        dist.all_reduce(sums, group=self.group)
        return {"psnr": float(sums[0]) / len(views), "ssim": float(sums[1]) / len(views),
                "views": len(views)}
