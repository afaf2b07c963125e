"""Time per training step vs ranks for `gsrender train --distributed`, and the bytes the
all-to-all moves (docs/distributed.md). Run under torchrun, e.g. on this CPU:

    torchrun --nproc_per_node=2 benchmarks/distributed.py --colmap ../shared/data/snowmiku_small

Each rank trains on its own views (one per step) with DistributedTrainer on real data; after
--warmup steps it times --steps steps (the ranks' slowest), then measures, for one step's real
exchange sizes, the transport alone (forward rows out + gradient rows back) and the render's
forward + backward, and prints one JSON line on rank 0."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import gsrender from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.distributed as dist

from gsrender import rasterize
from gsrender.distributed import comm
from gsrender.distributed.exchange import all_to_all_rows, exchange_counts
from gsrender.train import LearningRates, TrainConfig, load_colmap_dataset
from gsrender.train.distributed import DistributedTrainer
from gsrender.train.params import activated


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    dist.barrier()


def _timed(fn, device, reps: int) -> float:
    """Median seconds of fn() over reps, every rank starting together."""
    ts = []
    for _ in range(reps):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _kernel_ms(tr, view) -> dict:
    """The stages of one single-process render of this rank's shard into one view (profile=True
    timings, median of 3) and its backward: the per-kernel costs of the scaling model."""
    runs = []
    for _ in range(3):
        means, quats, scales, opac, sh = activated(tr.params)
        t0 = time.perf_counter()
        out = rasterize(means, quats, scales, opac, sh, view.viewmat[None], view.K[None], view.width,
                        view.height, sh_degree=3, profile=True)
        t1 = time.perf_counter()
        out.colors.sum().backward()
        runs.append({**out.meta["timings_ms"], "forward_total": (t1 - t0) * 1e3,
                     "backward_total": (time.perf_counter() - t1) * 1e3})
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--colmap", required=True)
    p.add_argument("--scale", type=float, default=0.5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = p.parse_args()
    device = comm.local_device(args.device)
    comm.init(device)
    world, rank = dist.get_world_size(), dist.get_rank()
    data = load_colmap_dataset(args.colmap, scale=args.scale, device=device)
    cfg = TrainConfig(steps=10**6, sh_degree=3, densify_from=1.0, lrs=LearningRates().scaled(2.0))
    tr = DistributedTrainer.from_points(*data.points, data.extent, cfg)
    for _ in range(args.warmup):
        tr.train_step(data.train)
    step_s = _timed(lambda: tr.train_step(data.train), device, args.steps)

    view = data.train[rank::world][0]

    def render_fwd_bwd():
        out = tr.render([view])
        tr.loss(out.colors, view.image[None]).backward()
        return out

    out = render_fwd_bwd()
    fwd_bwd_s = _timed(render_fwd_bwd, device, 3)
    ex = out.meta["exchange"]
    # replay this step's exchange alone: the counts, the int32 rows, the order keys, the float
    # rows and back
    vis = (out.meta["radii"] > 0).any(-1)  # [world, N]: one camera a rank, camera r on rank r
    send = vis.sum(1).tolist()
    recv = exchange_counts(send, device)
    width = ex["row_bytes_float"] // 4
    rows = torch.randn(sum(send), width, device=device)
    ints = torch.zeros(sum(send), 3, dtype=torch.int32, device=device)
    keys = torch.zeros(sum(send), dtype=torch.int64, device=device)

    def transport():
        exchange_counts(send, device)
        all_to_all_rows(ints, send, recv)
        all_to_all_rows(keys, send, recv)
        back = all_to_all_rows(rows, send, recv)
        all_to_all_rows(back, recv, send)

    transport_s = _timed(transport, device, 5)
    step_bytes = ex["bytes_sent"] + ex["rows_sent"] * ex["row_bytes_float"]  # + gradients back
    # (bytes_sent: float rows + int32 rows + the trainer's int64 order keys)
    stats = torch.tensor([[step_s, fwd_bwd_s, transport_s, step_bytes, ex["rows_sent"],
                           tr.num_gaussians, float(vis.float().mean())]], dtype=torch.float64,
                         device=device)
    allstats = torch.cat(comm.all_gather_rows(stats))
    if rank == 0:
        kernels = _kernel_ms(tr, view)
        cols = allstats.T.tolist()
        print(json.dumps({
            "ranks": world, "device": str(device), "threads": torch.get_num_threads(),
            "image": [view.width, view.height], "gaussians": int(sum(cols[5])),
            "step_s_max": max(cols[0]), "render_fwd_bwd_s_max": max(cols[1]),
            "transport_s_max": max(cols[2]),
            "bytes_per_step_per_rank": cols[3],  # forward rows, int rows, gradient rows back
            "rows_sent_per_rank": cols[4], "visible_fraction": cols[6],
            "row_bytes": ex["row_bytes_float"] + ex["row_bytes_int"],
            "one_process_kernels_ms_this_rank_shard": kernels}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
