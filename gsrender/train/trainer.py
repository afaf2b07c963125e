"""The 3DGS optimisation loop on top of gsrender.rasterize (Kerbl et al. 2023, the original schedule
scaled to a step or time budget).

Schedules are functions of the budget's progress in [0, 1] (steps done / steps, or training
seconds / budget seconds, whichever is further), so a run given only minutes still decays its
position learning rate, warms up SH degrees and stops densifying at the same relative points.
An optimiser step renders batch_views views (the mean of their gradients, gsplat's batch_size);
step counts are given in views and converted to optimiser steps (train.schedule).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from gsrender import metrics
from gsrender.render import RenderOutput, rasterize
from gsrender.scene import GaussianModel
from gsrender.train import densify as dens
from gsrender.train import optim
from gsrender.train.data import View, batch_lens
from gsrender.train.params import activated, params_from_model, params_from_points, to_model
from gsrender.train.schedule import Schedule

BACKGROUNDS = ("black", "white", "random")
PHASES = ("render", "loss", "backward", "optimizer", "densify")


@dataclass
class TrainConfig:
    # budget in training views (3DGS iterations; optimiser steps × views per step), and/or
    steps: int | None = 3000
    minutes: float | None = None  # budget in training minutes (evaluation time not counted)
    # the length in views over which the schedules run (default: the budget). 3DGS's schedule
    # is 30000 views long whatever the run: its 7k-step figures are a 30k run stopped at 7000
    # (densification and opacity resets still on, the position rate not yet decayed)
    schedule_steps: int | None = None
    sh_degree: int = 3
    ssim_lambda: float = 0.2  # loss = (1−λ)·L1 + λ·(1−SSIM)
    background: str = "random"  # training background; evaluation uses black (white if "white")
    lrs: optim.LearningRates = field(default_factory=optim.LearningRates)
    densify: dens.DensifyConfig = field(default_factory=dens.DensifyConfig)
    densify_every: int = 100  # views between densifications
    densify_from: float = 0.05  # progress window of densification (3DGS: 500 / 15000 of 30000)
    densify_until: float = 0.5
    # views between opacity resets, as 3DGS (3000): each reset costs a few hundred steps of
    # recovery, so budgets under 2 intervals of densification get none (0: never)
    opacity_reset_every: int = 3000
    sh_every: float = 1 / 30  # progress per added SH degree (3DGS: 1000 of 30000)
    seed: int = 0
    # the rasterizer's fixed-order gradient sums: a run resumed from a checkpoint equals the
    # uninterrupted one bit for bit (on one machine and thread count)
    deterministic: bool = False
    # torch's fused Adam (~4x faster on the CPU); one process only: its rounding depends on a
    # row's position, so shards would not train exactly as one process
    fused_adam: bool = False
    batch_views: int = 1  # views a process renders per optimiser step (gsplat's batch_size)
    steps_scaler: float = 1.0  # multiplies every step count (gsplat's steps_scaler)

    def __post_init__(self):
        if self.steps is None and self.minutes is None:
            raise ValueError("steps and minutes: give at least one budget")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.schedule_steps is not None and self.schedule_steps < 1:
            raise ValueError(f"schedule_steps must be >= 1, got {self.schedule_steps}")
        if self.minutes is not None and not self.minutes > 0:
            raise ValueError(f"minutes must be > 0, got {self.minutes}")
        if self.background not in BACKGROUNDS:
            raise ValueError(f"background must be one of {BACKGROUNDS}, got {self.background!r}")
        if not 0 <= self.sh_degree <= 3:
            raise ValueError(f"sh_degree must be in [0, 3], got {self.sh_degree}")
        if not 0.0 <= self.ssim_lambda <= 1.0:
            raise ValueError(f"ssim_lambda must lie in [0, 1], got {self.ssim_lambda}")
        if self.batch_views < 1:
            raise ValueError(f"batch_views must be >= 1, got {self.batch_views}")
        if not (self.steps_scaler > 0 and math.isfinite(self.steps_scaler)):
            raise ValueError(f"steps_scaler must be a finite number > 0, got {self.steps_scaler}")


class Trainer:
    """Holds the raw parameters, their Adam optimiser and the densification statistics."""

    world = 1  # processes that share an optimiser step (DistributedTrainer: the ranks)
    rank = 0

    def __init__(self, params: dict[str, torch.Tensor], extent: float, cfg: TrainConfig,
                 ids: torch.Tensor | None = None):
        """ids [N] int64: the Gaussians' persistent ids (default 0..N-1: the index in the initial
        point cloud); densification keys its ids and noise on them (train.noise)."""
        self.cfg, self.extent = cfg, float(extent)
        self.device = params["means"].device
        self.params = dict(params)
        n = params["means"].shape[0]
        self.ids = torch.arange(n, device=self.device) if ids is None else ids.to(self.device, torch.int64)
        if self.ids.shape != (n,):
            raise ValueError(f"ids must have shape [{n}] like the parameters, got {list(self.ids.shape)}")
        self.order = None  # one process: the rows' order is the order (DistributedTrainer: keys)
        self.views_per_step = cfg.batch_views * self.world
        self.sched = Schedule.of(cfg.steps, cfg.densify_every, cfg.opacity_reset_every,
                                 cfg.steps_scaler, self.views_per_step,
                                 cfg.schedule_steps if cfg.schedule_steps is not None else cfg.steps)
        self.lr_factor = optim.batch_scaling(self.views_per_step)[0]
        self.opt = optim.make_optimizer(self.params, cfg.lrs, self.extent, self.views_per_step,
                                        fused=cfg.fused_adam and self.world == 1)
        self.stats = dens.GradStats(self.num_gaussians, self.device)
        # the training backgrounds: one stream for the whole step's batch, the same on every rank
        # (so that ranks and one process with batch_views = ranks draw the same); split noise is
        # keyed by (seed, Gaussian id) instead, the same whichever shard holds the Gaussian
        self.bg_gen = torch.Generator(self.device).manual_seed(cfg.seed)
        self.step_count = 0
        self.train_seconds = 0.0
        # training seconds by phase: render (forward), loss, backward, optimiser, densification
        self.phase_seconds = dict.fromkeys(PHASES, 0.0)
        self._order: list[int] = []
        self.log: list[dict] = []  # densification events

    @classmethod
    def from_points(cls, xyz, rgb, extent: float, cfg: TrainConfig) -> Trainer:
        return cls(params_from_points(xyz, rgb, cfg.sh_degree), extent, cfg)

    @classmethod
    def from_model(cls, model: GaussianModel, extent: float, cfg: TrainConfig) -> Trainer:
        return cls(params_from_model(model, cfg.sh_degree), extent, cfg)

    @property
    def num_gaussians(self) -> int:
        """This process's Gaussians (a shard under DistributedTrainer)."""
        return int(self.params["means"].shape[0])

    @property
    def is_main(self) -> bool:
        """Whether this process writes the outputs (rank 0 under DistributedTrainer)."""
        return True

    def total_gaussians(self) -> int:
        return self.num_gaussians

    def _gather(self, t: torch.Tensor) -> torch.Tensor:
        """t concatenated over the processes that hold Gaussians (here: this one)."""
        return t

    def progress(self) -> float:
        """Where the schedules stand in [0, 1]: steps over the schedule's length, or the time
        budget's share, whichever is further."""
        p = 0.0
        if self.sched.horizon is not None:
            p = self.step_count / self.sched.horizon
        if self.cfg.minutes is not None:
            p = max(p, self.train_seconds / (60.0 * self.cfg.minutes))
        return p

    def done(self) -> bool:
        if self.sched.steps is not None and self.step_count >= self.sched.steps:
            return True
        return self.cfg.minutes is not None and self.train_seconds >= 60.0 * self.cfg.minutes

    def active_sh_degree(self) -> int:
        return min(self.cfg.sh_degree, int(self.progress() / self.cfg.sh_every))

    def model(self) -> GaussianModel:
        return to_model(self.params)

    def _background(self, train: bool) -> torch.Tensor:
        """[3], or [batch_views, 3] (this process's part of the step's batch) for training."""
        if train and self.cfg.background == "random":
            bg = torch.rand(self.views_per_step, 3, generator=self.bg_gen, device=self.device)
            return bg[self._mine()]
        return torch.full((3,), 1.0 if self.cfg.background == "white" else 0.0, device=self.device)

    def _mine(self) -> slice:
        """This process's part of a step's batch of views_per_step views."""
        b = self.cfg.batch_views
        return slice(self.rank * b, (self.rank + 1) * b)

    def render(self, views: list[View], background: torch.Tensor | None = None,
               sh_degree: int | None = None) -> RenderOutput:
        """Renders views (same image size) with the current parameters."""
        means, quats, scales, opac, sh = activated(self.params)
        vms = torch.stack([v.viewmat for v in views])  # [C, 4, 4]
        Ks = torch.stack([v.K for v in views])  # [C, 3, 3]
        deg = self.active_sh_degree() if sh_degree is None else sh_degree
        bg = self._background(train=False) if background is None else background
        return rasterize(means, quats, scales, opac, sh, vms, Ks, views[0].width, views[0].height,
                         sh_degree=deg, backgrounds=bg, deterministic=self.cfg.deterministic,
                         **batch_lens(views))

    def _next_views(self, views: list[View]) -> list[View]:
        """This process's views of the next step's batch: every training view once per epoch, in
        a fresh random order (3DGS's viewpoint stack), views_per_step a step (on every rank the
        same batch, from which each takes its part)."""
        if self.views_per_step > len(views):
            raise ValueError(f"batch_views x ranks = {self.views_per_step} views a step: more than "
                             f"the {len(views)} training views")
        batch = []
        for _ in range(self.views_per_step):
            if not self._order:
                self._order = torch.randperm(len(views), generator=torch.Generator().manual_seed(
                    self.cfg.seed + self.step_count)).tolist()
            batch.append(views[self._order.pop()])
        return batch[self._mine()]

    def loss(self, img: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        lam = self.cfg.ssim_lambda
        l1 = (img - target).abs().mean()
        return (1 - lam) * l1 + lam * (1 - metrics.ssim(img, target)) if lam > 0 else l1

    def train_step(self, views: list[View]) -> dict:
        """One optimiser step on the next batch of training views (the mean of their losses:
        the views share one image size), then densification when due."""
        t0 = tick = time.perf_counter()
        phases = self.phase_seconds

        def lap(name: str) -> None:
            nonlocal tick
            now = time.perf_counter()
            phases[name] += now - tick
            tick = now

        cfg = self.cfg
        prog = self.progress()
        optim.set_means_lr(self.opt, self.lr_factor * optim.exp_decay(
            prog, cfg.lrs.means_init * self.extent, cfg.lrs.means_final * self.extent))
        batch = self._next_views(views)
        out = self.render(batch, background=self._background(train=True))
        means2d = out.meta["means2d"]  # [C, N, 2] (C: the step's views, on every rank)
        means2d.retain_grad()
        img = out.colors  # [B, H, W, 3]
        lap("render")
        target = torch.stack([v.image for v in batch])
        loss = self.loss(img, target)
        self.opt.zero_grad(set_to_none=True)
        lap("loss")
        # each process's loss is the mean over its views; / world makes the sum of the ranks'
        # gradients the mean over all the step's views
        (loss / self.world).backward()
        lap("backward")
        self.opt.step()
        self.step_count += 1
        lap("optimizer")
        # the densification window on the step just taken, counted from 1 as 3DGS's loop counts
        # its iterations: statistics, densification and opacity resets while the step is before
        # densify_until (3DGS: iteration < 15000, so its last reset is at 12000)
        densifying = self.progress() < cfg.densify_until
        if densifying and means2d.grad is not None:
            self.stats.update(means2d.grad, out.meta["radii"], batch[0].width, batch[0].height)
        event = self._densify_if_due(densifying)
        lap("densify")
        self.train_seconds += time.perf_counter() - t0
        return {"loss": float(loss.detach()), "psnr": metrics.psnr(img.detach().clamp(0, 1), target),
                "n": self.num_gaussians, "densify": event}

    def _densify_if_due(self, densifying: bool) -> dict | None:
        cfg, sched, event, step = self.cfg, self.sched, None, self.step_count
        # after densify_from (3DGS: iteration > 500, so its first densification is at 600)
        if densifying and self.progress() > cfg.densify_from and step % sched.densify_every == 0:
            # after the first opacity reset interval, also prune Gaussians that grew too large
            large = 0 < sched.opacity_reset_every < step
            event, self.ids, self.order = dens.densify_and_prune(
                self.params, self.opt, self.stats, cfg.densify, self.extent, prune_large=large,
                ids=self.ids, seed=cfg.seed, event=step, gather=self._gather, order=self.order)
            event["step"] = step
            self.log.append(event)
            self.stats = dens.GradStats(self.num_gaussians, self.device)
        if densifying and sched.opacity_reset_every > 0 and step % sched.opacity_reset_every == 0:
            dens.reset_opacity(self.params, self.opt, cfg.densify.reset_opacity)
            self.log.append({"step": step, "opacity_reset": True})
        return event

    @torch.no_grad()
    def evaluate(self, views: list[View]) -> dict:
        """Mean PSNR / SSIM over views (one render each, colours clamped to [0, 1])."""
        if not views:
            return {"psnr": None, "ssim": None, "views": 0}
        ps, ss = [], []
        for v in views:
            img = self.render([v]).colors.clamp(0, 1)
            ps.append(metrics.psnr(img, v.image[None]))
            ss.append(float(metrics.ssim(img, v.image[None])))
        return {"psnr": sum(ps) / len(ps), "ssim": sum(ss) / len(ss), "views": len(views)}
