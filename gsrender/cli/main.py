"""The `gsrender` command (also `python -m gsrender`): demo, render, info.

    gsrender demo [--out out/demo] [--scene data/sample] [--max-views N]
    gsrender render --scene scene.ply|scene.splat [--colmap DIR | --cameras-json FILE | --orbit N] ...
    gsrender info [--json]
    gsrender view SCENE.ply|SCENE.splat [--colmap DIR] [--host H] [--port P]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

import gsrender
from gsrender.render import MODES, PRECISIONS

OPS = ("project_fwd", "project_bwd", "sh_fwd", "sh_bwd", "bin_tiles", "rasterize_fwd", "rasterize_bwd",
       "contributors", "weight_stats")
STAGES = ("project", "sh", "bin", "raster_fwd")
UP_AXES = {"+x": (1, 0, 0), "-x": (-1, 0, 0), "+y": (0, 1, 0), "-y": (0, -1, 0), "+z": (0, 0, 1),
           "-z": (0, 0, -1)}


class CliError(Exception):
    """A user-facing failure: printed as `gsrender: error: ...`, exit status 1."""


# ---------------------------------------------------------------------------------------------
# kernels and devices


def repo_root() -> Path:
    return Path(gsrender.__file__).resolve().parents[1]


def sample_dir() -> Path:
    return repo_root() / "data" / "sample"


def op_backends() -> dict[str, dict[str, bool]]:
    """For each op: whether the loaded extension registered a CPU / CUDA kernel for it."""
    from gsrender import ops  # noqa: F401  (loads _C: schemas and kernels)

    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return {op: {key: bool(has(f"gsrender::{op}", key)) for key in ("CPU", "CUDA")} for op in OPS}


def compiled_with_cuda() -> bool:
    return any(b["CUDA"] for b in op_backends().values())


def pick_device(backend: str) -> torch.device:
    """backend auto|cpu|cuda -> the device to render on (auto: CUDA when usable, else CPU)."""
    cuda_ok = torch.cuda.is_available() and compiled_with_cuda()
    if backend == "cuda":
        if not torch.cuda.is_available():
            raise CliError("--backend cuda: torch sees no CUDA device")
        if not compiled_with_cuda():
            raise CliError("--backend cuda: the gsrender extension was built without CUDA kernels "
                           "(they build when a GPU is visible, or with FORCE_CUDA=1)")
        return torch.device("cuda")
    if backend == "auto" and cuda_ok:
        return torch.device("cuda")
    return torch.device("cpu")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------------------------------
# scenes and cameras


def load_model(path: str | Path) -> gsrender.GaussianModel:
    from gsrender.io import load_ply, load_splat

    path = Path(path)
    if not path.is_file():
        raise CliError(f"--scene: no such file {str(path)!r}")
    suffix = path.suffix.lower()
    if suffix == ".ply":
        return load_ply(path)
    if suffix == ".splat":
        return load_splat(path)
    raise CliError(f"--scene: expected a .ply or .splat file, got {str(path)!r}")


def load_cameras(path: str | Path) -> list:
    """Cameras from JSON: either {"frames": [...]} (snowmiku's cameras_small.json layout) or a
    plain list of {name, width, height, K, viewmat_w2c_opencv} (data/sample/cameras.json)."""
    from gsrender.io import Camera, load_cameras_json

    path = Path(path)
    if not path.is_file():
        raise CliError(f"cameras JSON: no such file {str(path)!r}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CliError(f"{path}: not valid JSON ({e})") from None
    if isinstance(data, dict) and "frames" in data:
        return load_cameras_json(path)
    if not isinstance(data, list) or not data:
        raise CliError(f"{path}: expected a non-empty list of cameras or an object with 'frames'")
    cams = []
    for i, c in enumerate(data):
        try:
            cams.append(Camera(name=str(c.get("name", f"cam_{i:03d}")), width=c["width"],
                               height=c["height"], K=c["K"], viewmat=c["viewmat_w2c_opencv"]))
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise CliError(f"{path}: camera {i} is malformed ({type(e).__name__}: {e})") from None
    return cams


def intrinsics(width: int, height: int, fov_deg: float) -> torch.Tensor:
    """K [3,3]: horizontal field of view fov_deg, square pixels, principal point at the centre."""
    if not 0.0 < fov_deg < 180.0:
        raise CliError(f"--fov: must be in (0, 180) degrees, got {fov_deg}")
    f = 0.5 * width / math.tan(math.radians(fov_deg) / 2)
    return torch.tensor([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]])


def look_at(eye: torch.Tensor, target: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """World-to-camera OpenCV viewmat [4,4] (x right, y down, z forward) of a camera at eye
    looking at target, with `up` showing as image-up (float64 inside, float32 out)."""
    fwd = target - eye
    fwd = fwd / fwd.norm()
    right = torch.linalg.cross(fwd, up)
    if right.norm() < 1e-6:  # looking along up: any perpendicular will do
        right = torch.linalg.cross(fwd, torch.eye(3, dtype=fwd.dtype)[fwd.abs().argmin()])
    right = right / right.norm()
    down = torch.linalg.cross(fwd, right)
    R = torch.stack([right, down, fwd])  # [3, 3] rows = camera axes in world
    vm = torch.eye(4, dtype=torch.float64)
    vm[:3, :3] = R
    vm[:3, 3] = -R @ eye
    return vm.float()


def orbit_cameras(means: torch.Tensor, n: int, width: int, height: int, fov_deg: float, up: str,
                  elevation_deg: float = 20.0, distance_scale: float = 1.0) -> list:
    """n cameras on a circle around the scene, looking at its centre: centre = per-axis median of
    the means, radius = half the diagonal of the 2..98 percentile bounding box (robust to stray
    Gaussians), far enough that this sphere fits the narrower field of view, elevation_deg above
    the plane normal to `up` (an UP_AXES key)."""
    from gsrender.io import Camera

    if n < 1:
        raise CliError(f"--orbit: need at least 1 camera, got {n}")
    pts = means.detach().cpu().double()
    if pts.shape[0] > 1_000_000:  # percentiles on a deterministic subsample: same answer, less time
        pts = pts[:: pts.shape[0] // 1_000_000]
    centre = pts.median(dim=0).values  # [3]
    lo, hi = (torch.from_numpy(np.percentile(pts.numpy(), q, axis=0)) for q in (2.0, 98.0))
    radius = max(0.5 * float((hi - lo).norm()), 1e-6)
    K = intrinsics(width, height, fov_deg)
    half_fov = math.atan(0.5 * min(width / K[0, 0].item(), height / K[1, 1].item()))
    dist = distance_scale * radius / math.sin(half_fov)
    u = torch.tensor(UP_AXES[up], dtype=torch.float64)
    e1 = torch.linalg.cross(u, torch.eye(3, dtype=torch.float64)[u.abs().argmin()])
    e1 = e1 / e1.norm()
    e2 = torch.linalg.cross(u, e1)
    el = math.radians(elevation_deg)
    cams = []
    for i in range(n):
        a = 2 * math.pi * i / n
        eye = centre + dist * (math.cos(el) * (math.cos(a) * e1 + math.sin(a) * e2) + math.sin(el) * u)
        cams.append(Camera(name=f"orbit_{i:03d}", width=width, height=height, K=K,
                           viewmat=look_at(eye, centre, u)))
    return cams


def default_up(scene: Path) -> str:
    # .splat files come from web viewers whose scenes stand upright along −y (the plant in
    # ../shared/data does); 3DGS PLYs from this package's synthetic scenes use +z up.
    return "-y" if scene.suffix.lower() == ".splat" else "+z"


# ---------------------------------------------------------------------------------------------
# rendering


def render_view(model, cam, device: torch.device, *, mode: str = "sorted", precision: str = "auto",
                background=None, features: bool = True, profile: bool = False, sh_degree=None):
    """rasterize() one Camera: RGB (SH colours), depth, alpha and the model's features if any."""
    deg = model.sh_degree if sh_degree is None else min(int(sh_degree), model.sh_degree)
    bg = None if background is None else torch.as_tensor(background, dtype=torch.float32, device=device)
    return gsrender.rasterize(
        model.means, model.quats, model.scales, model.opacities, model.sh,
        cam.viewmat[None].to(device), cam.K[None].to(device), cam.width, cam.height,
        sh_degree=deg, features=model.features if features else None, backgrounds=bg, mode=mode,
        precision=precision, backend=device.type, profile=profile)


def _grad_model(model):
    """A copy of the model whose float tensors are leaves that require grad (for backward timing)."""
    from dataclasses import replace

    leaf = lambda t: None if t is None else t.detach().clone().requires_grad_(True)
    return replace(model, means=leaf(model.means), quats=leaf(model.quats), scales=leaf(model.scales),
                   opacities=leaf(model.opacities), sh=leaf(model.sh), features=leaf(model.features))


def _backward_ms(out, device: torch.device) -> float:
    """Time of one backward pass through every output (gradient 1 everywhere)."""
    outs = [t for t in (out.colors, out.depths, out.alphas, out.features) if t is not None]
    _sync(device)
    t0 = time.perf_counter()
    torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])
    _sync(device)
    return (time.perf_counter() - t0) * 1e3


def _name(kind: str, i: int, n: int) -> str:
    return f"{kind}_{i:0{max(2, len(str(n - 1)))}d}.png"


def save_views(out, folder: Path, i: int, n: int, what: set[str], pca: dict | None = None) -> dict:
    """Writes the requested pictures of view i; returns {kind: image} for reuse. pca: a
    viz.pca_basis to colour the features of every view alike (fitted on this view when None)."""
    from gsrender import viz

    alpha = out.alphas[0]
    imgs = {}
    if "rgb" in what:
        imgs["rgb"] = viz.to_uint8(out.colors[0])
    if "depth" in what:
        imgs["depth"] = viz.depth_to_color(out.depths[0], alpha)
    if "alpha" in what:
        imgs["alpha"] = viz.to_uint8(alpha)
    if "features" in what and out.features is not None:
        imgs["features_pca"] = viz.feature_pca(out.features[0], alpha, basis=pca)
    for kind, img in imgs.items():
        viz.save_image(folder / _name(kind, i, n), img)
    return imgs


def _stat_row(name: str, vals: list[float]) -> str:
    return f"  {name:<12} {statistics.mean(vals):>9.2f} {statistics.median(vals):>9.2f} {min(vals):>9.2f}"


def timing_table(per_frame: list[dict]) -> str:
    keys = [k for k in (*STAGES, "forward", "backward") if all(k in f for f in per_frame)]
    lines = [f"  {'stage':<12} {'mean ms':>9} {'median':>9} {'min':>9}"]
    lines += [_stat_row(k, [f[k] for f in per_frame]) for k in keys]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# subcommands


def cmd_demo(args) -> int:
    from tqdm import tqdm

    from gsrender import viz
    from gsrender.io import load_ply

    scene_dir = Path(args.scene) if args.scene else sample_dir()
    ply, cams_json = scene_dir / "scene.ply", scene_dir / "cameras.json"
    if not (ply.is_file() and cams_json.is_file()):
        raise CliError(f"--scene: {str(scene_dir)!r} lacks scene.ply and cameras.json (regenerate the "
                       f"bundled sample with `python scripts/make_sample_scene.py`)")
    device = pick_device(args.backend)
    model = load_ply(ply).to(device=device, dtype=torch.float32)
    cams = load_cameras(cams_json)
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
        _sync(device)
        t0 = time.perf_counter()
        out = render_view(gmodel, cam, device, profile=True, **kw)
        _sync(device)
        frame = dict(out.meta["timings_ms"], forward=(time.perf_counter() - t0) * 1e3)
        frame["backward"] = _backward_ms(out, device)
        frame["packing_efficiency"] = gsrender.packing_efficiency(out.meta)
        per_frame.append(frame)
        stats.append(out.meta["stats"].detach().cpu())
        with torch.no_grad():
            imgs = save_views(out, out_dir, i, len(cams), what, pca)
        sheet.append([imgs.get(k) for k in ("rgb", "depth", "alpha", "features_pca")])
    cols = ["RGB", "expected depth", "alpha"] + (["features (PCA)"] if D else [])
    viz.save_contact_sheet(out_dir / "overview.png", [r[: len(cols)] for r in sheet],
                           row_labels=[c.name for c in cams], col_labels=cols)
    efficiency = gsrender.packing_efficiency({"stats": torch.cat(stats)})
    w, h = cams[0].width, cams[0].height
    print(f"\nper-frame timings ({w}x{h}, mode={args.mode}, precision={args.precision}, "
          f"{torch.get_num_threads()} threads):")
    print(timing_table(per_frame))
    print(f"packing efficiency (contributing / evaluated pairs): {efficiency:.3f}")
    summary = {"scene": str(ply), "n_gaussians": model.num_gaussians, "feature_dim": D,
               "device": device.type, "mode": args.mode, "precision": args.precision,
               "packing_efficiency": efficiency, "frames": per_frame}
    (out_dir / "timings.json").write_text(json.dumps(summary, indent=1))
    print(f"wrote {len(cams)} views and overview.png to {out_dir}")
    _demo_plant(args, out_dir / "plant", device)
    return 0


def _demo_plant(args, out_dir: Path, device: torch.device) -> None:
    """The real capture next to the synthetic scene: a turntable of data/plant (skipped when
    --turntable-frames is 0 or the file is missing), then where the viewer command is."""
    from gsrender.turntable import CREDIT, plant_path, render_turntable

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


def _render_cameras(args, scene: Path, model) -> list:
    from gsrender.io import load_colmap_cameras

    if args.colmap:
        cams = load_colmap_cameras(args.colmap)
    elif args.cameras_json:
        cams = load_cameras(args.cameras_json)
    else:
        up = args.up if args.up != "auto" else default_up(scene)
        return orbit_cameras(model.means, args.orbit or 8, args.width or 640, args.height or 480,
                             args.fov, up, args.elevation, args.distance_scale)
    if args.width or args.height:  # resize, keeping the aspect ratio when only one is given
        out = []
        for c in cams:
            w = args.width or max(1, round(c.width * args.height / c.height))
            h = args.height or max(1, round(c.height * args.width / c.width))
            out.append(c.resized(w, h))
        cams = out
    return cams


def cmd_render(args) -> int:
    from tqdm import tqdm

    from gsrender import viz

    scene = Path(args.scene)
    device = pick_device(args.backend)
    model = load_model(scene).to(device=device, dtype=torch.float32)
    cams = _render_cameras(args, scene, model)
    if args.max_views is not None:
        cams = cams[: args.max_views]
    what = {w.strip() for w in args.what.split(",") if w.strip()}
    bad = what - {"rgb", "depth", "alpha", "features"}
    if bad or not what:
        raise CliError(f"--what: expected a comma list of rgb,depth,alpha,features, got {args.what!r}")
    out_dir = Path(args.out)
    times, pca = [], None
    with torch.no_grad():
        for i, cam in enumerate(tqdm(cams, desc="render", unit="view", disable=args.no_progress)):
            _sync(device)
            t0 = time.perf_counter()
            out = render_view(model, cam, device, mode=args.mode, precision=args.precision,
                              background=args.background, features="features" in what,
                              sh_degree=args.sh_degree)
            _sync(device)
            times.append((time.perf_counter() - t0) * 1e3)
            if pca is None and out.features is not None:  # one PCA colouring for every view
                pca = viz.pca_basis(out.features[0], out.alphas[0])
            save_views(out, out_dir, i, len(cams), what, pca)
    print(f"rendered {len(cams)} views of {model.num_gaussians} Gaussians to {out_dir} "
          f"(median {statistics.median(times):.1f} ms/view on {device.type})")
    return 0


def info_dict() -> dict:
    from gsrender import _C

    backends = op_backends()
    cuda_build = any(b["CUDA"] for b in backends.values())
    cuda_avail = torch.cuda.is_available()
    avail = ["cpu"] + (["cuda"] if cuda_avail and cuda_build else [])
    return {
        "gsrender": gsrender.__version__,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": sys.version.split()[0],
        "threads": torch.get_num_threads(),
        "cuda_available": cuda_avail,
        "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if cuda_avail else [],
        "compiled_with_cuda": cuda_build,
        "backends": avail,
        # the CPU kernels' instruction-set copy in use, and those this CPU runs (best first)
        "cpu_isa": _C.cpu_isa(),
        "cpu_isas": _C.cpu_isas(),
        "ops": backends,
        "missing_cpu_kernels": [op for op, b in backends.items() if not b["CPU"]],
    }


def cmd_info(args) -> int:
    d = info_dict()
    if args.json:
        print(json.dumps(d, indent=1))
        return 0
    yn = lambda b: "yes" if b else "no"
    print(f"gsrender {d['gsrender']}  (torch {d['torch']}, CUDA runtime {d['torch_cuda']}, "
          f"Python {d['python']}, {d['threads']} CPU threads)")
    print(f"compiled with CUDA kernels: {yn(d['compiled_with_cuda'])}")
    print(f"CUDA device available: {yn(d['cuda_available'])}"
          + (f" ({', '.join(d['cuda_devices'])})" if d["cuda_devices"] else ""))
    print(f"backends: {', '.join(d['backends'])}")
    print(f"CPU kernels: {d['cpu_isa']} copy (this CPU runs {', '.join(d['cpu_isas'])}; "
          f"GSRENDER_CPU_ISA=auto|avx512|avx2|baseline chooses)")
    print(f"  {'op':<15} {'CPU':>4} {'CUDA':>5}")
    for op, b in d["ops"].items():
        print(f"  {op:<15} {yn(b['CPU']):>4} {yn(b['CUDA']):>5}")
    if d["missing_cpu_kernels"]:
        print(f"note: no CPU kernel yet for {', '.join(d['missing_cpu_kernels'])}; rendering needs them")
    return 0


def cmd_bench(argv: list[str]) -> int:
    """`gsrender bench [fps options]`: benchmarks/fps.py's main, imported by path from the repo
    root (the benchmarks are not part of the installed package)."""
    import importlib.util

    path = repo_root() / "benchmarks" / "fps.py"
    if not path.is_file():
        print(f"gsrender: error: bench needs the repository's benchmarks folder ({path} is missing; "
              f"run from a source checkout)", file=sys.stderr)
        return 1
    root = str(repo_root())
    if root not in sys.path:  # fps.py imports benchmarks.common
        sys.path.insert(0, root)
    spec = importlib.util.spec_from_file_location("gsrender_bench_fps", path)
    fps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fps)
    return fps.main(argv, prog="gsrender bench")


# ---------------------------------------------------------------------------------------------
# argument parsing


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=MODES, default="sorted", help="sorted (3DGS) or weighted (sort-free)")
    p.add_argument("--precision", choices=PRECISIONS, default="auto",
                   help="fp32 = exact scalar per-pixel path; others use the matrix path")
    p.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--max-views", type=int, default=None, metavar="N", help="render only the first N views")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gsrender", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"gsrender {gsrender.__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="{demo,render,info,view,bench,train,loc,voda}")

    d = sub.add_parser("demo", help="render the bundled sample scene: PNGs, contact sheet, timings")
    d.add_argument("--out", default="out/demo", help="output folder (default out/demo)")
    d.add_argument("--scene", default=None,
                   help="folder with scene.ply + cameras.json (default: the repo's data/sample)")
    d.add_argument("--turntable-frames", type=int, default=24, metavar="N",
                   help="orbit views of the bundled plant capture (default 24; 0 skips it)")
    _common(d)
    d.set_defaults(func=cmd_demo)

    r = sub.add_parser("render", help="render a .ply/.splat scene from COLMAP, JSON or orbit cameras")
    r.add_argument("--scene", required=True, help="scene file (.ply INRIA layout or .splat)")
    cams = r.add_mutually_exclusive_group()
    cams.add_argument("--colmap", metavar="SPARSE_DIR", help="COLMAP model folder (cameras/images .bin|.txt)")
    cams.add_argument("--cameras-json", metavar="FILE", help="camera JSON (frames layout or a list)")
    cams.add_argument("--orbit", type=int, metavar="N", help="N orbit cameras around the scene (default 8)")
    r.add_argument("--width", type=int, default=None, help="image width (orbit default 640; resizes others)")
    r.add_argument("--height", type=int, default=None, help="image height (orbit default 480)")
    r.add_argument("--fov", type=float, default=60.0, help="orbit horizontal field of view, degrees")
    r.add_argument("--up", choices=("auto", *UP_AXES), default="auto",
                   help="orbit up axis (auto: -y for .splat, +z for .ply)")
    r.add_argument("--elevation", type=float, default=20.0, help="orbit elevation above the horizon, deg")
    r.add_argument("--distance-scale", type=float, default=1.0, help="orbit distance multiplier")
    r.add_argument("--sh-degree", type=int, default=None, help="use at most this SH degree")
    r.add_argument("--background", type=float, nargs=3, default=None, metavar=("R", "G", "B"))
    r.add_argument("--what", default="rgb", help="comma list of rgb,depth,alpha,features (default rgb)")
    r.add_argument("--out", default="out/render", help="output folder (default out/render)")
    _common(r)
    r.set_defaults(func=cmd_render)

    i = sub.add_parser("info", help="versions, backends and which ops have kernels")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.set_defaults(func=cmd_info)

    from gsrender.viewer.cli import add_parser as add_view_parser  # imports viser only when run

    add_view_parser(sub)

    # parsed by benchmarks/fps.py (see main); listed here for --help
    sub.add_parser("bench", help="FPS profiling harness (benchmarks/fps.py; `gsrender bench --help`)",
                   add_help=False)
    # parsed by gsrender/train/run.py (see main); listed here for --help
    sub.add_parser("train", help="train a 3DGS scene (`gsrender train --help`)", add_help=False)

    # the applications register their own subcommands (imported here: they pull in OpenCV etc.)
    from gsrender.loc.cli import add_loc_parser  # SplitGS-Loc: `gsrender loc build|query`
    from gsrender.voda.cli import add_parser as add_voda_parser  # VODA: `gsrender voda`

    add_loc_parser(sub)
    add_voda_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # every option after it belongs to the fps harness
        return cmd_bench(argv[1:])
    if argv[:1] == ["train"]:  # every option after it belongs to the trainer
        from gsrender.train.run import main as train_main

        return train_main(argv[1:])
    args = build_parser().parse_args(argv)
    for name in ("max_views", "orbit", "width", "height"):
        v = getattr(args, name, None)
        if v is not None and v < 1:
            print(f"gsrender: error: --{name.replace('_', '-')} must be >= 1, got {v}", file=sys.stderr)
            return 2
    try:
        return args.func(args)
    except CliError as e:
        print(f"gsrender: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        return 0
    except (ValueError, TypeError, OSError) as e:  # bad files / arguments found by the loaders
        print(f"gsrender: error: {e}", file=sys.stderr)
        return 1
    except NotImplementedError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"gsrender: error: a kernel is missing ({first}); see `gsrender info`", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
