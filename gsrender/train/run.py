"""`gsrender train` / benchmarks/train.py: train a 3DGS scene on a COLMAP folder or a synthetic
scene, with held-out evaluation, PNG snapshots, a JSON report, a PLY export and a PSNR plot."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from gsrender.io import atomic
from gsrender.sysinfo import cpu_model
from gsrender.train import checkpoint
from gsrender.train.data import Dataset, View, load_colmap_dataset, synthetic_dataset
from gsrender.train.densify import DensifyConfig
from gsrender.train.optim import LearningRates
from gsrender.train.outputs import write_outputs
from gsrender.train.trainer import BACKGROUNDS, TrainConfig, Trainer

# A CPU-sized budget: 1000 steps take snowmiku_small (11 training photos, 494x371) to ~35 dB on
# the training views with 680 s of CPU time on one core (README "Training"), within 15 minutes
# on 2 idle cores. 3DGS's own schedule is 30000 steps at lr x1 (--preset 3dgs).
DEFAULT_STEPS = 1000
DEFAULT_LR_SCALE = 2.0

# Option defaults a preset sets (options given on the command line still win).
PRESETS = {
    # The original 3DGS code's schedule and rates (arguments/__init__.py of the release): learning
    # rates as released, a black background, densification every 100 iterations from 500 to
    # 15000 of a 30000-iteration schedule, opacity resets every 3000, an SH degree every 1000;
    # --steps 7000 is its 7k checkpoint (the schedule stays 30000 long). No Gaussian cap: the
    # count is whatever densification makes (3DGS has none).
    "3dgs": {"lr_scale": 1.0, "background": "black", "schedule_steps": 30000,
             "densify_every": 100, "densify_from": 500 / 30000, "densify_until": 0.5,
             "opacity_reset_every": 3000, "grad_threshold": 2e-4, "ssim_lambda": 0.2,
             "sh_degree": 3, "max_gaussians": 10_000_000, "fused_adam": True},
}


def build_parser(prog: str = "gsrender train") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--colmap", metavar="ROOT", help="scene folder with sparse/0 and the images")
    src.add_argument("--synthetic", action="store_true", help="render targets from a synthetic scene")
    p.add_argument("--images", default="images", help="image folder inside ROOT (default images)")
    p.add_argument("--scale", type=float, default=1.0, help="resize images and cameras by this (<= 1)")
    p.add_argument("--hold", type=int, default=8, help="hold out every N-th view (LLFF; default 8)")
    p.add_argument("--n-test", type=int, default=None, help="hold out N evenly spread views instead")
    p.add_argument("--init-ply", default=None, help="start from this 3DGS PLY instead of the points")
    p.add_argument("--steps", type=int, default=None,
                   help=f"training budget in views (default {DEFAULT_STEPS} without --minutes): "
                        "optimiser steps = steps x steps-scaler / (batch-views x ranks); at one view "
                        "a step (the default, one process) the optimiser steps, as 3DGS's "
                        "iterations. Under --distributed N ranks render N views a step, so "
                        "--steps 200 runs 200/N steps of N views: the views a single process sees "
                        "in 200 steps (gsplat's advice to run N-times fewer steps, applied "
                        "automatically; docs/distributed.md)")
    p.add_argument("--batch-views", type=int, default=1,
                   help="views a process renders per optimiser step, their mean gradient (gsplat's "
                        "batch_size; learning rates x sqrt(V), Adam betas 1-V(1-beta) for V = "
                        "batch-views x ranks, as gsplat). One process with --batch-views N takes "
                        "the steps N ranks take")
    p.add_argument("--steps-scaler", type=float, default=1.0,
                   help="multiply every step count (--steps, --densify-every, --opacity-reset-every, "
                        "--eval-every, --snapshot-every) by this (gsplat's steps_scaler)")
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="option defaults of a published recipe: 3dgs = the original code's "
                        "schedule and learning rates (30000-step schedule, --steps stops it early)")
    p.add_argument("--schedule-steps", type=int, default=None,
                   help="length of the schedules in views (default: --steps)")
    p.add_argument("--minutes", type=float, default=None, help="training time budget")
    p.add_argument("--sh-degree", type=int, default=3)
    p.add_argument("--background", choices=BACKGROUNDS, default="random")
    p.add_argument("--lr-scale", type=float, default=DEFAULT_LR_SCALE,
                   help=f"multiply every 3DGS learning rate (default {DEFAULT_LR_SCALE}: short budgets)")
    p.add_argument("--ssim-lambda", type=float, default=0.2)
    p.add_argument("--max-gaussians", type=int, default=150_000)
    p.add_argument("--grad-threshold", type=float, default=2e-4)
    p.add_argument("--prune-screen-radius", type=float, default=None, metavar="PX",
                   help="also prune Gaussians drawn larger than PX pixels in radius (after the "
                        "first opacity reset; default: never, as the original code in effect)")
    p.add_argument("--densify-every", type=int, default=100, help="views between densifications")
    p.add_argument("--densify-from", type=float, default=0.05, help="fraction of the schedule")
    p.add_argument("--densify-until", type=float, default=0.5, help="fraction of the schedule")
    p.add_argument("--opacity-reset-every", type=int, default=3000,
                   help="views between opacity resets while densifying (0: never)")
    p.add_argument("--synthetic-gaussians", type=int, default=4000)
    p.add_argument("--synthetic-views", type=int, default=24)
    p.add_argument("--width", type=int, default=128, help="synthetic image width")
    p.add_argument("--height", type=int, default=96, help="synthetic image height")
    p.add_argument("--out", default="out/train", help="output folder (default out/train)")
    p.add_argument("--eval-every", type=int, default=250, help="training + held-out PSNR every N views (0: end only)")
    p.add_argument("--eval-train-views", type=int, default=0,
                   help="the periodic training-view PSNR over at most N views spread over the "
                        "training set (0: all; the final evaluation always takes all)")
    p.add_argument("--snapshot-every", type=int, default=500, help="PNG of a held-out view every N views")
    p.add_argument("--plot", action="store_true", help="write psnr.png (PSNR vs steps)")
    p.add_argument("--resume", metavar="OUT", default=None,
                   help="continue the run in OUT from its newest checkpoint (alone, or with "
                        "--steps / --minutes to extend its budget: the other options are the run's)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--deterministic", action="store_true",
                   help="fixed-order gradient sums: a resumed run equals the uninterrupted one bit "
                        "for bit (same machine and threads)")
    p.add_argument("--fused-adam", action="store_true",
                   help="torch's fused Adam: ~4x faster on the CPU; one process only (not with "
                        "--distributed, whose shards then would not train exactly as one process)")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="write OUT/checkpoints/step_N.pt every N steps (0: never); --resume OUT "
                        "continues from the newest")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    p.add_argument("--distributed", action="store_true",
                   help="shard the Gaussians and views over torchrun's ranks (docs/distributed.md)")
    p.add_argument("--view", action="store_true",
                   help="watch training live in the browser viewer (needs viser; stays up after)")
    p.add_argument("--view-host", default="127.0.0.1", help="viewer address (default loopback)")
    p.add_argument("--view-port", type=int, default=8080, help="viewer port (default 8080)")
    return p


def _config(args) -> TrainConfig:
    steps = args.steps if args.steps is not None or args.minutes is not None else DEFAULT_STEPS
    dcfg = DensifyConfig(grad_threshold=args.grad_threshold, max_gaussians=args.max_gaussians,
                         max_screen_radius=args.prune_screen_radius)
    return TrainConfig(steps=steps, minutes=args.minutes, schedule_steps=args.schedule_steps,
                       sh_degree=args.sh_degree, ssim_lambda=args.ssim_lambda,
                       background=args.background, densify=dcfg,
                       lrs=LearningRates().scaled(args.lr_scale), densify_every=args.densify_every,
                       densify_from=args.densify_from, densify_until=args.densify_until,
                       opacity_reset_every=args.opacity_reset_every, seed=args.seed,
                       deterministic=args.deterministic, fused_adam=args.fused_adam,
                       batch_views=args.batch_views,
                       steps_scaler=args.steps_scaler)


def load_dataset(args, device: torch.device) -> Dataset:
    if args.colmap:
        return load_colmap_dataset(args.colmap, images=args.images, scale=args.scale,
                                   every=args.hold, n_test=args.n_test, device=device)
    return synthetic_dataset(args.synthetic_gaussians, args.synthetic_views, args.width, args.height,
                             every=args.hold, seed=args.seed, device=device)


def make_trainer(args, data: Dataset, cfg: TrainConfig) -> Trainer:
    if args.distributed:
        from gsrender.train.distributed import DistributedTrainer as cls
    else:
        cls = Trainer
    if args.init_ply:
        from gsrender.io.ply import load_ply

        return cls.from_model(load_ply(args.init_ply).to(data.train[0].image.device),
                              data.extent, cfg)
    if data.points is None:
        raise ValueError("the dataset has no SfM points: pass --init-ply")
    return cls.from_points(*data.points, data.extent, cfg)


def snapshot(trainer: Trainer, view: View, path: Path) -> None:
    """Render | target side by side as an 8-bit PNG."""
    import imageio.v3 as iio

    with torch.no_grad():
        img = trainer.render([view]).colors[0].clamp(0, 1)  # [H, W, 3]
    if not trainer.is_main:
        return
    both = torch.cat([img, view.image], dim=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(path, (both.cpu().numpy() * 255 + 0.5).astype(np.uint8))


def plot(history: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    if history["train"]:
        s, v = zip(*history["train"])
        ax.plot(s, v, label="step's view (running mean)", lw=1, alpha=0.6)
    for key, label in (("train_eval", "training views"), ("test", "held-out views")):
        if history[key]:
            s, v = zip(*[e[:2] for e in history[key]])
            ax.plot(s, v, "o-", label=label, ms=3)
    ax.set_xlabel("step")
    ax.set_ylabel("PSNR (dB)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def train(args, data: Dataset, out: Path, on_step=None, resume: dict | None = None) -> dict | None:
    """The loop with its side outputs; returns the report written to out/results.json (None on
    the ranks other than 0 under --distributed). on_step(trainer, step_result), when given, runs
    after every step (the live viewer). resume: a checkpoint (train.checkpoint.load) to go on
    from; every --checkpoint-every steps one is written."""
    from tqdm import tqdm

    cfg = _config(args)
    trainer = make_trainer(args, data, cfg)
    # train: per-step PSNR (running mean); train_eval / test: all training / held-out views,
    # as (step, PSNR[, training seconds so far])
    history: dict = {"train": [], "train_eval": [], "test": []}
    ema, wall0, cpu0, n_init = None, 0.0, 0.0, trainer.total_gaussians()
    if resume is not None:
        checkpoint.restore(trainer, resume["trainer"])
        run = resume["run"]
        history, ema, wall0, cpu0, n_init = (run["history"], run["ema"], run["wall_seconds"],
                                             run["cpu_seconds"], run["gaussians_initial"])
    eval_every, snapshot_every = trainer.sched.count(args.eval_every), trainer.sched.count(args.snapshot_every)
    n_train = len(data.train)
    stride = -(-n_train // args.eval_train_views) if args.eval_train_views else 1
    train_probe = data.train[::stride]
    ckpt_every = trainer.sched.count(args.checkpoint_every)
    t_start, cpu_start = time.perf_counter(), time.process_time()

    def run_state() -> dict:
        return {"args": dict(vars(args)), "history": history, "ema": ema,
                "wall_seconds": wall0 + time.perf_counter() - t_start,
                "cpu_seconds": cpu0 + time.process_time() - cpu_start, "gaussians_initial": n_init}

    bar = tqdm(total=trainer.sched.steps, initial=trainer.step_count,
               disable=args.no_progress or not trainer.is_main, unit="step", dynamic_ncols=True)
    while not trainer.done():
        r = trainer.train_step(data.train)
        ema = r["psnr"] if ema is None else 0.95 * ema + 0.05 * r["psnr"]
        s = trainer.step_count
        if s % 10 == 0:
            history["train"].append((s, ema))
        if eval_every and s % eval_every == 0:
            history["train_eval"].append((s, trainer.evaluate(train_probe)["psnr"], trainer.train_seconds))
            if data.test:
                history["test"].append((s, trainer.evaluate(data.test)["psnr"]))
        if data.test and snapshot_every and s % snapshot_every == 0:
            snapshot(trainer, data.test[0], out / "snapshots" / f"step_{s:06d}.png")
        if ckpt_every and s % ckpt_every == 0 and trainer.is_main:
            checkpoint.save(out, trainer, {"run": run_state()})
        if on_step is not None:
            on_step(trainer, r)
        bar.update(1)
        bar.set_postfix(loss=f"{r['loss']:.4f}", psnr=f"{ema:.2f}", N=r["n"], refresh=False)
    bar.close()
    state = run_state()
    res_train, res_test = trainer.evaluate(data.train), trainer.evaluate(data.test)
    for key, res in (("train_eval", res_train), ("test", res_test)):
        if res["views"] and (not history[key] or history[key][-1][0] != trainer.step_count):
            history[key].append((trainer.step_count, res["psnr"], trainer.train_seconds))
    if data.test:
        snapshot(trainer, data.test[0], out / "snapshots" / f"step_{trainer.step_count:06d}.png")
    model = trainer.model()  # gathers the shards under --distributed
    n_final = trainer.total_gaussians()  # a collective under --distributed: every rank takes part
    if not trainer.is_main:
        return None
    ply = write_outputs(out, model, trainer.step_count, args, data)
    steps = max(trainer.step_count, 1)
    report = {
        "source": data.meta, "steps": trainer.step_count,  # optimiser steps
        "views_per_step": trainer.views_per_step, "views_seen": trainer.step_count * trainer.views_per_step,
        "train_seconds": trainer.train_seconds, "wall_seconds": state["wall_seconds"],
        "cpu_seconds": state["cpu_seconds"],  # process CPU time of the whole loop: the load-independent cost
        "seconds_per_step": trainer.train_seconds / steps,
        "seconds_per_step_by_phase": {k: v / steps for k, v in trainer.phase_seconds.items()},
        "peak_rss_mb": _peak_rss_mb(),
        "resumed": resume is not None,
        "gaussians_initial": n_init, "gaussians_final": n_final,
        "ply": str(ply), "train": res_train, "test": res_test,
        "image_size": [data.train[0].width, data.train[0].height],
        "views": {"train": [v.name for v in data.train], "test": [v.name for v in data.test]},
        "config": dict(vars(args)),
        "densify_log": trainer.log, "history": history,
        "machine": {"device": str(trainer.device), "threads": torch.get_num_threads(),
                    "cpu": cpu_model(), "load_avg_1m": _loadavg(),
                    "ranks": dist.get_world_size() if args.distributed else 1},
    }
    atomic.write_json(out / "results.json", report, indent=1, default=str)
    if args.plot:
        plot(history, out / "psnr.png")
    return report


def _peak_rss_mb() -> float:
    """This process's largest resident set so far (Linux reports kB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


# What a resumed run may change: its budget and how it reports (not the model or the schedule)
RESUMABLE = ("steps", "minutes", "checkpoint_every", "eval_every", "snapshot_every", "threads",
             "no_progress", "plot")


def _resume_parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="continue a run from its newest checkpoint")
    p.add_argument("--resume", metavar="OUT", required=True,
                   help="the run's output folder (holding checkpoints/)")
    for name in ("steps", "checkpoint_every", "eval_every", "snapshot_every", "threads"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=None)
    p.add_argument("--minutes", type=float, default=None)
    p.add_argument("--no-progress", action="store_true", default=None)
    p.add_argument("--plot", action="store_true", default=None)
    return p


def parse_args(argv: list[str] | None, prog: str) -> tuple[argparse.Namespace, dict | None]:
    """(arguments, checkpoint or None). With --resume OUT the arguments are the run's own, as its
    newest checkpoint recorded them, with RESUMABLE options overridden where given; otherwise a
    --preset's defaults apply, then the command line."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a == "--resume" or a.startswith("--resume=") for a in argv):
        r = _resume_parser(prog).parse_args(argv)
        path = checkpoint.latest(r.resume)
        if path is None:
            raise SystemExit(f"{prog}: error: --resume: no checkpoint in {Path(r.resume) / checkpoint.FOLDER}")
        state = checkpoint.load(path)
        args = argparse.Namespace(**state["run"]["args"])
        for name in RESUMABLE:
            if getattr(r, name) is not None:
                setattr(args, name, getattr(r, name))
        args.out = r.resume
        return args, state
    p = build_parser(prog)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", choices=sorted(PRESETS), default=None)
    preset = pre.parse_known_args(argv)[0].preset
    if preset:
        p.set_defaults(**PRESETS[preset])
    return p.parse_args(argv), None


def main(argv: list[str] | None = None, prog: str = "gsrender train") -> int:
    try:
        args, resume = parse_args(argv, prog)
    except ValueError as e:  # an unreadable checkpoint
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    if args.checkpoint_every and args.distributed:
        raise SystemExit(f"{prog}: error: --checkpoint-every is for one process (not --distributed)")
    for name in ("steps", "hold", "max_gaussians", "densify_every", "width", "height", "batch_views",
                 "schedule_steps"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise SystemExit(f"{prog}: error: --{name.replace('_', '-')} must be >= 1, got {v}")
    if not (args.steps_scaler > 0 and np.isfinite(args.steps_scaler)):
        raise SystemExit(f"{prog}: error: --steps-scaler must be a finite number > 0, got {args.steps_scaler}")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        if args.distributed:
            from gsrender.distributed import comm

            device = comm.local_device(device.type)
            comm.init(device)
        data = load_dataset(args, device)
        view = None
        if args.view and args.distributed:
            raise ValueError("--view and --distributed cannot be combined (one viewer, many ranks)")
        if args.view:
            from gsrender.viewer.training import TrainingView

            view = TrainingView(data.train, host=args.view_host, port=args.view_port)
        rep = train(args, data, out, on_step=view, resume=resume)
    except (ValueError, TypeError, OSError) as e:  # bad folders, files or arguments
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:
        if not args.distributed:
            raise
        # gloo reports a peer that died as a RuntimeError, NCCL and timeouts as DistError ones
        print(f"{prog}: error: rank {os.environ.get('RANK')} stopped: {type(e).__name__}: "
              f"{str(e).splitlines()[0] if str(e) else ''}\n(an error in a collective means that "
              f"another rank exited, failed or did not answer within {comm.timeout_seconds():.0f} s:"
              f" see its log)", file=sys.stderr)
        _leave_distributed(1)
    if rep is not None:
        _print_summary(rep, data, out)
    if args.distributed:
        dist.destroy_process_group()
        _leave_distributed(0)
    if view is not None:
        view.wait()
    return 0


def _leave_distributed(rc: int) -> None:
    """End a rank's process at once with rc. gloo's transport threads can stay joinable after its
    process group is gone (after a peer failure, and now and then after a clean destroy), and the
    interpreter's normal shutdown then aborts ("terminate called without an active exception",
    rc -6) instead of returning rc. Everything the run writes is on disk by now; only the
    streams need flushing."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def _print_summary(rep: dict, data: Dataset, out: Path) -> None:
    print(f"{rep['steps']} steps x {rep['views_per_step']} views in {rep['train_seconds']:.0f} s "
          f"({rep['seconds_per_step']:.3f} s/step), "
          f"{rep['gaussians_initial']} -> {rep['gaussians_final']} Gaussians")
    print(f"train    PSNR {rep['train']['psnr']:.2f} dB  SSIM {rep['train']['ssim']:.4f}  "
          f"({rep['train']['views']} views)")
    if data.test:
        print(f"held-out PSNR {rep['test']['psnr']:.2f} dB  SSIM {rep['test']['ssim']:.4f}  "
              f"({rep['test']['views']} views)")
    print(f"wrote {out / 'results.json'}, {rep['ply']}")
