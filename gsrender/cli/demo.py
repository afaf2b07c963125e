"""`gsrender demo`: the bundled sample scene (PNGs, contact sheet, per-stage timings, forward and
backward) and the real plant capture's turntable."""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

import torch
from tqdm import tqdm

from gsrender import viz
from gsrender.cli.common import CliError, add_render_options, load_model, pick_device, sync
from gsrender.io import atomic, load_ply
from gsrender.io.camera_json import load_cameras_json
from gsrender.io.paths import repo_root, sample_dir
from gsrender.render import packing_efficiency
from gsrender.turntable import CREDIT, plant_path, render_turntable
from gsrender.views import render_view, save_views

STAGES = ("project", "sh", "bin", "raster_fwd")


def add_parser(sub) -> None:
    d = sub.add_parser("demo", help="render the bundled sample scene: PNGs, contact sheet, timings")
    d.add_argument("--out", default="out/demo", help="output folder (default out/demo)")
    d.add_argument("--scene", default=None,
                   help="folder with scene.ply + cameras.json (default: the repo's data/sample)")
    d.add_argument("--turntable-frames", type=int, default=24, metavar="N",
                   help="orbit views of the bundled plant capture (default 24; 0 skips it)")
    add_render_options(d)
    d.set_defaults(func=cmd_demo)


def _grad_model(model):
    """A copy of the model whose float tensors are leaves that require grad (for backward timing)."""
    leaf = lambda t: None if t is None else t.detach().clone().requires_grad_(True)
    return replace(model, means=leaf(model.means), quats=leaf(model.quats), scales=leaf(model.scales),
                   opacities=leaf(model.opacities), sh=leaf(model.sh), features=leaf(model.features))


def _backward_ms(out, device: torch.device) -> float:
    """Time of one backward pass through every output (gradient 1 everywhere)."""
    outs = [t for t in (out.colors, out.depths, out.alphas, out.features) if t is not None]
    sync(device)
    t0 = time.perf_counter()
    torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])
    sync(device)
    return (time.perf_counter() - t0) * 1e3


def _stat_row(name: str, vals: list[float]) -> str:
    return f"  {name:<12} {statistics.mean(vals):>9.2f} {statistics.median(vals):>9.2f} {min(vals):>9.2f}"


def timing_table(per_frame: list[dict]) -> str:
    keys = [k for k in (*STAGES, "forward", "backward") if all(k in f for f in per_frame)]
    lines = [f"  {'stage':<12} {'mean ms':>9} {'median':>9} {'min':>9}"]
    lines += [_stat_row(k, [f[k] for f in per_frame]) for k in keys]
    return "\n".join(lines)


def cmd_demo(args) -> int:
    scene_dir = Path(args.scene) if args.scene else sample_dir()
    ply, cams_json = scene_dir / "scene.ply", scene_dir / "cameras.json"
    if not (ply.is_file() and cams_json.is_file()):
        raise CliError(f"--scene: {str(scene_dir)!r} lacks scene.ply and cameras.json (regenerate the "
                       f"bundled sample with `python scripts/make_sample_scene.py`)")
    device = pick_device(args.backend)
    model = load_ply(ply).to(device=device, dtype=torch.float32)
    cams = load_cameras_json(cams_json)
    if args.max_views is not None:
        cams = cams[: args.max_views]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    D = 0 if model.features is None else model.features.shape[1]
    print(f"scene {ply}: {model.num_gaussians} Gaussians, SH degree {model.sh_degree}, D={D} features; "
          f"{len(cams)} views on {device.type}")
    kw = {"mode": args.mode, "precision": args.precision}
    gmodel = _grad_model(model)
    with torch.no_grad():  # warm-up (thread pools, allocator, first-call costs); fits the PCA colours
        warm = render_view(model, cams[0], device, **kw)
    pca = viz.pca_basis(warm.features[0], warm.alphas[0]) if warm.features is not None else None

    per_frame, stats, sheet = [], [], []
    what = {"rgb", "depth", "alpha", "features"}
    for i, cam in enumerate(tqdm(cams, desc="demo", unit="view", disable=args.no_progress)):
        for t in (gmodel.means, gmodel.quats, gmodel.scales, gmodel.opacities, gmodel.sh, gmodel.features):
            if t is not None:
                t.grad = None
        sync(device)
        t0 = time.perf_counter()
        out = render_view(gmodel, cam, device, profile=True, **kw)
        sync(device)
        frame = dict(out.meta["timings_ms"], forward=(time.perf_counter() - t0) * 1e3)
        frame["backward"] = _backward_ms(out, device)
        frame["packing_efficiency"] = packing_efficiency(out.meta)
        per_frame.append(frame)
        stats.append(out.meta["stats"].detach().cpu())
        with torch.no_grad():
            imgs = save_views(out, out_dir, i, len(cams), what, pca)
        sheet.append([imgs.get(k) for k in ("rgb", "depth", "alpha", "features_pca")])
    cols = ["RGB", "expected depth", "alpha"] + (["features (PCA)"] if D else [])
    viz.save_contact_sheet(out_dir / "overview.png", [r[: len(cols)] for r in sheet],
                           row_labels=[c.name for c in cams], col_labels=cols)
    efficiency = packing_efficiency({"stats": torch.cat(stats)})
    w, h = cams[0].width, cams[0].height
    print(f"\nper-frame timings ({w}x{h}, mode={args.mode}, precision={args.precision}, "
          f"{torch.get_num_threads()} threads):")
    print(timing_table(per_frame))
    print(f"packing efficiency (contributing / evaluated pairs): {efficiency:.3f}")
    summary = {"scene": str(ply), "n_gaussians": model.num_gaussians, "feature_dim": D,
               "device": device.type, "mode": args.mode, "precision": args.precision,
               "packing_efficiency": efficiency, "frames": per_frame}
    atomic.write_text(out_dir / "timings.json", json.dumps(summary, indent=1))
    print(f"wrote {len(cams)} views and overview.png to {out_dir}")
    _demo_plant(args, out_dir / "plant", device)
    return 0


def _demo_plant(args, out_dir: Path, device: torch.device) -> None:
    """The real capture next to the synthetic scene: a turntable of data/plant (skipped when
    --turntable-frames is 0 or the file is missing), then where the viewer command is."""
    if args.turntable_frames < 0:
        raise CliError(f"--turntable-frames: must be >= 0, got {args.turntable_frames}")
    plant = plant_path()
    if args.turntable_frames and plant.is_file():
        model = load_model(plant).to(device=device, dtype=torch.float32)
        r = render_turntable(model, device, out_dir, frames=args.turntable_frames)
        print(f"\nreal scene {plant.relative_to(repo_root())} ({model.num_gaussians} Gaussians; {CREDIT}): "
              f"{r['frames']} orbit views {r['size']}x{r['size']}, median {r['render_ms']:.0f} ms/view; "
              f"wrote turntable.gif and overview.png to {out_dir} ({r['seconds']:.1f} s)")
    print(f"\nlook around in the browser: gsrender view {plant}  (or {sample_dir() / 'scene.ply'})")
