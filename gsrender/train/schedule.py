"""Step-counted schedules under batches of views: the rule that makes N ranks (or B views a step
on one process) train on the same budget as one view a step.

Every step count the user gives (the budget `steps`, `densify_every`, `opacity_reset_every`,
and the command's `eval_every` / `snapshot_every`) counts *training views*, as 3DGS's iterations
do at one view an iteration. A run that renders V = batch_views × ranks views an optimiser step
(their mean gradient) runs each count × steps_scaler / V optimiser steps: gsplat's
`Config.adjust_steps(steps_scaler)` with the "N× batch, N× fewer steps" factor that gsplat's
simple_trainer asks distributed users to pass by hand applied automatically. Schedules given as a
fraction of the budget (densify_from / densify_until, SH warm-up, position-LR decay) follow.
"""
from __future__ import annotations

from dataclasses import dataclass


def scaled_count(n: int | None, factor: float) -> int | None:
    """n (views) × factor as a whole number of optimiser steps: nearest, at least 1; None (no
    budget) and 0 (never) stay as they are."""
    if not n:
        return n
    return max(1, round(n * factor))


@dataclass(frozen=True)
class Schedule:
    """The trainer's step counts in optimiser steps (see the module docstring)."""

    factor: float  # optimiser steps per training view: steps_scaler / views_per_step
    steps: int | None
    densify_every: int
    opacity_reset_every: int
    horizon: int | None = None  # the schedules' length (progress 1); None: the time budget's

    @classmethod
    def of(cls, steps: int | None, densify_every: int, opacity_reset_every: int,
           steps_scaler: float, views_per_step: int, horizon: int | None = None) -> Schedule:
        """horizon: the schedules' length in views (the budget `steps` when they end together)."""
        f = steps_scaler / views_per_step
        return cls(f, scaled_count(steps, f), scaled_count(densify_every, f),
                   scaled_count(opacity_reset_every, f), scaled_count(horizon, f))

    def count(self, n: int | None) -> int | None:
        """Another count in views (e.g. --eval-every) in optimiser steps."""
        return scaled_count(n, self.factor)
