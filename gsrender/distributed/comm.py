"""Process-group set-up and the small collectives the distributed renderer and trainer share:
variable-length all_gather (padded to the longest, then trimmed) with an autograd version whose
backward sums the gradient over ranks and keeps this rank's rows."""
from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist

# Seconds a collective waits for its peers before it raises (a rank that died or hangs): long
# enough for a slow step on a loaded CPU, short enough that a failure never looks like a hang.
DEFAULT_TIMEOUT_S = 300.0
TIMEOUT_ENV = "GSRENDER_DIST_TIMEOUT"


def timeout_seconds() -> float:
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        t = float(raw)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds, got {raw!r}") from None
    if not t > 0:
        raise ValueError(f"{TIMEOUT_ENV} must be > 0, got {raw!r}")
    return t


def init(device: torch.device) -> None:
    """Joins the torchrun group (env:// rendezvous: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):
    NCCL for CUDA devices, gloo for the CPU, collectives timing out after timeout_seconds()."""
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise ValueError(f"--distributed needs the torchrun environment; {', '.join(missing)} "
                         f"unset (launch with `torchrun --nproc_per_node=N -m gsrender train ...`)")
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    kw = {"device_id": device} if device.type == "cuda" else {}
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_seconds()), **kw)


def local_device(kind: str) -> torch.device:
    """CUDA device LOCAL_RANK for kind "cuda" (one GPU a process), else the CPU."""
    if kind == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def all_gather_rows(t: torch.Tensor, group=None) -> list[torch.Tensor]:
    """Every rank's t ([n_r, ...], n_r may differ; same trailing shape and dtype) on every rank."""
    world = dist.get_world_size(group)
    n = torch.tensor([t.shape[0]], dtype=torch.int64, device=t.device)
    ns = [torch.empty_like(n) for _ in range(world)]
    dist.all_gather(ns, n, group=group)
    counts = [int(c) for c in ns]
    pad = t.new_zeros((max(counts), *t.shape[1:]))
    pad[: t.shape[0]] = t
    out = [torch.empty_like(pad) for _ in range(world)]
    dist.all_gather(out, pad, group=group)
    return [o[:c] for o, c in zip(out, counts)]


class _GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, group):
        parts = all_gather_rows(t.detach(), group)
        rank = dist.get_rank(group)
        ctx.span = (sum(p.shape[0] for p in parts[:rank]), t.shape[0], group)
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, v_out):
        start, n, group = ctx.span
        v_out = v_out.contiguous().clone()
        # every rank's rows were used by every rank: their gradient is the sum over ranks
        dist.all_reduce(v_out, group=group)
        return v_out[start:start + n], None


def all_gather_rows_autograd(t: torch.Tensor, group=None) -> torch.Tensor:
    """cat(all_gather_rows(t)) whose backward all-reduces the gradient and returns this rank's
    rows' share (all ranks must run the backward together)."""
    return _GatherRows.apply(t, group)
