"""Mip-NeRF 360 evaluation runner: PSNR / SSIM / LPIPS / FPS / #Gaussians of trained 3DGS scenes.

    python benchmarks/mipnerf360.py --data ROOT --models DIR [--scenes a,b] [--images NAME] [--out DIR]
    python benchmarks/mipnerf360.py --synthetic [--quick | --smoke] [--out DIR]

Real data: ROOT/<scene>/{sparse/0, images_2, images_4} (the Mip-NeRF 360 release, or a scene made
by `gsrender prepare`) and the trained models DIR/<scene>/point_cloud/iteration_30000/point_cloud.ply
(3DGS's layout, which `gsrender train` writes too; else the latest iteration).
Every scene of bicycle, flowers, garden, stump, treehill (outdoor, images_4) and room, counter,
kitchen, bonsai (indoor, images_2) that is present (or any scene --scenes names) is evaluated on its
test views: every 8th image sorted by name, as 3DGS's --eval does, with the intrinsics scaled to the
image size used. A scene made by `gsrender prepare` (ROOT/<scene>/prepare.json) is evaluated as the
papers do: the test views are the registered photos whose index among all the photos of its
manifest is a multiple of 8 (gsrender.io.mipnerf360.held_out, the trainer's rule too), and its
images default to `images` (the prepared full size; --images overrides for every scene). Renders
are quantised to 8 bits before PSNR / SSIM, as 3DGS's metrics.py compares saved PNGs; a strip of a
few held-out renders above their photos is written to --out as <scene>_strip.png.

Synthetic (--synthetic, or no --data): the Mip-NeRF 360-like presets of gsrender.synthetic, scaled
down; the ground truth is the exact scalar kernel in float64 and the evaluated render is the
default float32 matrix path, so PSNR measures the renderer's arithmetic, not a model. Every such
row says "synthetic".

FPS is render only (gsrender.rasterize under no_grad, one view per call, after warm-up): views /
total seconds. LPIPS (VGG) is computed only when the `lpips` package and the VGG weights are
already on disk (nothing is downloaded); otherwise it is "n/a". Writes results.json and results.md
(per-scene rows, then outdoor / indoor / all means, the layout papers use) to --out.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gsrender
from benchmarks.common import Timer, env_block
from gsrender.io import atomic
from gsrender.io.cameras import Camera, stack_cameras
from gsrender.metrics import psnr, ssim

OUTDOOR = ("bicycle", "flowers", "garden", "stump", "treehill")
INDOOR = ("room", "counter", "kitchen", "bonsai")
IMAGES = {"outdoor": "images_4", "indoor": "images_2"}  # the 3DGS paper's evaluation resolutions
ITERATION = 30000
METRICS = ("psnr", "ssim", "lpips", "fps")
STRIP_VIEWS = 4  # held-out views in each real scene's <scene>_strip.png

CONFIGS = {
    # synthetic: Gaussians per preset, image downscale, test views; warmup: untimed renders
    "full": {"n": 200_000, "downscale": 2, "views": 4, "warmup": 2, "max_views": None},
    "quick": {"n": 15_000, "downscale": 4, "views": 2, "warmup": 1, "max_views": 3},
    "smoke": {"n": 600, "downscale": 16, "views": 1, "warmup": 0, "max_views": 1},
}


def kind_of(scene: str) -> str:
    """outdoor / indoor for the release's scenes, "other" for a capture of one's own (only in the
    "all" mean)."""
    return "outdoor" if scene in OUTDOOR else "indoor" if scene in INDOOR else "other"


@dataclass
class SceneData:
    """One scene to evaluate: the model, its test cameras and their ground-truth images [H,W,3]."""

    name: str
    kind: str
    source: str  # "mipnerf360" or "synthetic"
    model: gsrender.GaussianModel
    cameras: list[Camera]
    gts: list[torch.Tensor]
    images: str  # the image folder (real) or a description (synthetic)
    ply: str | None = None
    quantize: bool = False  # renders rounded to 8 bits before the metrics (real photos are 8-bit)
    protocol: str = "synthetic"  # "release" (every 8th camera) or "prepare.json" (every 8th photo)
    photos: dict | None = None  # a prepared scene's counts: {"photos", "registered"}


# ---------------------------------------------------------------------------------------------
# inputs


def read_image(path: Path, bg_color: torch.Tensor) -> torch.Tensor:
    """[H,W,3] float32 in [0,1]; an alpha channel is composited over the background, as 3DGS
    does for RGBA ground truth."""
    import imageio.v3 as iio

    a = np.asarray(iio.imread(path))
    if a.ndim == 2:
        a = np.repeat(a[..., None], 3, axis=-1)
    scale = float(np.iinfo(a.dtype).max) if np.issubdtype(a.dtype, np.integer) else 1.0
    img = torch.from_numpy(a.astype(np.float32) / scale)  # [H, W, 3 or 4]
    if img.shape[-1] == 4:
        alpha = img[..., 3:]
        img = img[..., :3] * alpha + bg_color * (1.0 - alpha)
    if img.shape[-1] != 3:
        raise ValueError(f"{path}: expected a grey, RGB or RGBA image, got shape {list(a.shape)}")
    return img


def default_images(name: str, prepared: bool) -> str:
    """The image folder a scene is evaluated on: the release's images_4 (outdoor) / images_2
    (indoor) downscales, or `images` for a scene made by `gsrender prepare` (its photos are
    already small: the shared bonsai photos, 800x533, are about half the release's images_2)."""
    return "images" if prepared or kind_of(name) == "other" else IMAGES[kind_of(name)]


def real_scenes(data: Path, models: Path, names: list[str], bg_color: torch.Tensor,
                max_views: int | None, images: str | None = None) -> list[SceneData]:
    from gsrender.io.mipnerf360 import load_mipnerf360_scene
    from gsrender.sfm.manifest import read_manifest

    out = []
    for name in names:
        if not (data / name / "sparse" / "0").is_dir():
            continue  # scene not downloaded: skipped, as the task says "those present"
        kind = kind_of(name)
        prepared = read_manifest(data / name) is not None
        folder = images or default_images(name, prepared)
        if not (data / name / folder).is_dir():
            raise ValueError(f"{name}: no image folder {data / name / folder}")
        d = load_mipnerf360_scene(data / name, folder, split="test", model_root=models / name,
                                  iteration=ITERATION)
        model = d["model"]
        if model is None:
            print(f"[mipnerf360] {name}: no point_cloud/iteration_*/point_cloud.ply under "
                  f"{models / name}; skipped", file=sys.stderr)
            continue
        if not d["cameras"]:
            raise ValueError(f"{name}: no test view (every 8th photo) among the registered ones")
        cams = d["cameras"][:max_views] if max_views else d["cameras"]
        gts = [read_image(c.image_path, bg_color) for c in cams]
        ply = str(model.meta.get("source", "")) or None
        m = d["manifest"]
        out.append(SceneData(name, kind, "mipnerf360", model, cams, gts, folder, ply, quantize=True,
                             protocol="prepare.json" if m else "release",
                             photos={"photos": len(m["photos"]), "registered": len(m["registered"])}
                             if m else None))
    return out


def synthetic_scenes(names: list[str], cfg: dict, bg_color: torch.Tensor) -> list[SceneData]:
    from gsrender.synthetic import PRESETS, make_preset

    out = []
    for name in names:
        spec = PRESETS[name]
        model, vms, Ks, w0, h0 = make_preset(name, scale=cfg["n"] / spec["n_gaussians"], sh_degree=3,
                                             n_views=cfg["views"])
        f = cfg["downscale"]
        cams = [Camera(f"view_{i:03d}", w0, h0, Ks[i], vms[i]).resized(round(w0 / f), round(h0 / f))
                for i in range(len(vms))]
        # ground truth: the exact scalar kernel in float64 (the renderer's own "higher precision")
        gts = [render(model.to(torch.float64), [c], bg_color.double(), "fp32")[0].float() for c in cams]
        out.append(SceneData(name, kind_of(name), "synthetic", model, cams, gts,
                             f"synthetic 1/{f} resolution, GT = float64 scalar kernel"))
    return out


# ---------------------------------------------------------------------------------------------
# rendering and metrics


def render(model: gsrender.GaussianModel, cams: list[Camera], bg_color: torch.Tensor,
           precision: str = "auto") -> torch.Tensor:
    """[C,H,W,3] colours of the model in the cameras (all of one size), clamped to [0,1] as the
    3DGS evaluation does before comparing."""
    vms, Ks, w, h = stack_cameras(cams)
    dev, dt = model.means.device, model.means.dtype
    with torch.no_grad():
        out = gsrender.rasterize(model.means, model.quats, model.scales, model.opacities, model.sh,
                                 vms.to(dev, dt), Ks.to(dev, dt), w, h, sh_degree=model.sh_degree,
                                 backgrounds=bg_color.to(dev, dt), precision=precision)
    return out.colors.clamp(0.0, 1.0)


def quantize8(img: torch.Tensor) -> torch.Tensor:
    """A [0,1] image as an 8-bit file holds it (round(255·x) / 255): 3DGS's metrics.py compares
    the renders it saved as PNG with the 8-bit photos."""
    return (img.clamp(0.0, 1.0) * 255.0).round() / 255.0


def lpips_fn(device: torch.device):
    """LPIPS-VGG as f(img, gt) on [H,W,3] images, or None when the package or any weight file is
    not already on disk (lpips would otherwise download torchvision's VGG16)."""
    try:
        import lpips
    except ImportError:
        return None
    hub = Path(torch.hub.get_dir()) / "checkpoints"
    if not any(hub.glob("vgg16-*.pth")):
        return None
    try:
        net = lpips.LPIPS(net="vgg", verbose=False).to(device).eval()
    except Exception as e:  # noqa: BLE001 - any failure to build it means "n/a", not a crash
        print(f"[mipnerf360] LPIPS unavailable ({e}); reporting n/a", file=sys.stderr)
        return None

    def f(img: torch.Tensor, gt: torch.Tensor) -> float:
        to = lambda x: x.permute(2, 0, 1)[None].to(device) * 2 - 1  # [1, 3, H, W] in [-1, 1]
        with torch.no_grad():
            return float(net(to(img), to(gt)))
    return f


def strip_picks(n: int, k: int = STRIP_VIEWS) -> list[int]:
    """k view indices spread evenly over n (all of them when n <= k)."""
    return list(range(n)) if n <= k else sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def evaluate(sd: SceneData, bg_color: torch.Tensor, device: torch.device, warmup: int, lp,
             progress: bool = True, strip: list | None = None) -> dict:
    """Metrics per test view and their means; FPS from the timed renders alone (at the test
    views' size). strip: a list that receives (render, photo) [H,W,3] pairs of a few views."""
    from tqdm import tqdm

    model = sd.model.to(device)
    bg = bg_color.to(device)
    for _ in range(warmup):
        render(model, sd.cameras[:1], bg)
    picks = set(strip_picks(len(sd.cameras))) if strip is not None else set()
    views, total_ms = [], 0.0
    for i, (cam, gt) in enumerate(tqdm(list(zip(sd.cameras, sd.gts)), desc=sd.name, unit="view",
                                       disable=not progress)):
        if (gt.shape[1], gt.shape[0]) != (cam.width, cam.height):
            raise ValueError(f"{sd.name}/{cam.name}: image is {gt.shape[1]}x{gt.shape[0]}, camera "
                             f"{cam.width}x{cam.height}")
        with Timer(device) as t:
            img = render(model, [cam], bg)[0]  # [H, W, 3]
        total_ms += t.ms
        img, gt = img.float().cpu(), gt.float()
        if sd.quantize:
            img = quantize8(img)
        if i in picks:
            strip.append((img, gt))
        views.append({"name": cam.name, "psnr": psnr(img, gt), "ssim": float(ssim(img, gt)),
                      "lpips": lp(img, gt) if lp is not None else None, "ms": t.ms})
    mean = lambda k: None if any(v[k] is None for v in views) else float(np.mean([v[k] for v in views]))
    return {"scene": sd.name, "kind": sd.kind, "source": sd.source, "images": sd.images, "ply": sd.ply,
            "protocol": sd.protocol, "photos": sd.photos, "quantized_8bit": sd.quantize,
            "n_views": len(views), "n_gaussians": sd.model.num_gaussians, "sh_degree": sd.model.sh_degree,
            "width": sd.cameras[0].width, "height": sd.cameras[0].height,
            "psnr": mean("psnr"), "ssim": mean("ssim"), "lpips": mean("lpips"),
            "fps": len(views) / (total_ms / 1e3) if total_ms > 0 else None, "views": views}


def save_strip(path: Path, pairs: list) -> Path:
    """One PNG: the held-out renders in the top row, their photos below (8-bit, side by side)."""
    from gsrender import viz

    top = np.concatenate([viz.to_uint8(r) for r, _ in pairs], axis=1)
    bottom = np.concatenate([viz.to_uint8(g) for _, g in pairs], axis=1)
    return viz.save_image(path, np.concatenate([top, bottom], axis=0))


def group_means(rows: list[dict]) -> dict:
    """Outdoor / indoor / all means of each metric (None when a group is empty or a value is n/a)."""
    out = {}
    for group, sel in (("outdoor", lambda r: r["kind"] == "outdoor"), ("indoor", lambda r: r["kind"] == "indoor"),
                       ("all", lambda r: True)):
        rs = [r for r in rows if sel(r)]
        out[group] = {"n_scenes": len(rs)}
        for k in (*METRICS, "n_gaussians"):
            vals = [r[k] for r in rs]
            out[group][k] = float(np.mean(vals)) if vals and all(v is not None for v in vals) else None
    return out


# ---------------------------------------------------------------------------------------------
# report


def _f(v, fmt: str) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def _n(v) -> str:
    return "n/a" if v is None else f"{v / 1e6:.2f}M" if v >= 1e5 else f"{round(v):,}"


def markdown(result: dict) -> str:
    env = result["env"]
    head = ("| scene | source | kind | views | size | PSNR ↑ | SSIM ↑ | LPIPS ↓ | FPS ↑ | #Gaussians |\n"
            "|---|---|---|---|---|---|---|---|---|---|")
    lines = [f"# Mip-NeRF 360 evaluation ({result['source']})", "",
             (f"Device: {env['device']} ({env['cpu']}, {env['cpu_threads']} threads, load {env['loadavg']}); "
              f"torch {env['torch']}; commit {env['commit'][:10]}; background {result['settings']['background']}."),
             "", head]
    for r in result["scenes"]:
        lines.append(f"| {r['scene']} | {r['source']} | {r['kind']} | {r['n_views']} | {r['width']}x{r['height']} "
                     f"| {_f(r['psnr'], '.2f')} | {_f(r['ssim'], '.4f')} | {_f(r['lpips'], '.4f')} "
                     f"| {_f(r['fps'], '.2f')} | {_n(r['n_gaussians'])} |")
    label = " (synthetic)" if result["source"] == "synthetic" else ""
    lines += ["", "| mean | scenes | PSNR ↑ | SSIM ↑ | LPIPS ↓ | FPS ↑ | #Gaussians |", "|---|---|---|---|---|---|---|"]
    for g, m in result["means"].items():
        if m["n_scenes"]:
            lines.append(f"| {g}{label} | {m['n_scenes']} | {_f(m['psnr'], '.2f')} | {_f(m['ssim'], '.4f')} "
                         f"| {_f(m['lpips'], '.4f')} | {_f(m['fps'], '.2f')} | {_n(m['n_gaussians'])} |")
    if result["source"] == "synthetic":
        lines += ["", ("Synthetic rows: procedural Mip-NeRF 360-like presets (gsrender.synthetic), ground truth "
                       "= the float64 scalar kernel; not comparable with published numbers.")]
    for r in result["scenes"]:
        if r["source"] == "synthetic":
            continue
        split = (f"every 8th of the {r['photos']['photos']} photos of prepare.json "
                 f"({r['photos']['registered']} registered)" if r["protocol"] == "prepare.json"
                 else "every 8th registered camera")
        lines += ["", f"## {r['scene']}: {r['n_views']} test views ({split}), {r['images']} "
                      f"{r['width']}x{r['height']}, renders quantised to 8 bits"
                      + (f"; strip: {r['strip']}" if r.get("strip") else ""),
                  "", "| view | PSNR ↑ | SSIM ↑ |", "|---|---|---|"]
        lines += [f"| {v['name']} | {_f(v['psnr'], '.2f')} | {_f(v['ssim'], '.4f')} |" for v in r["views"]]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# command line


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, help="Mip-NeRF 360 root (ROOT/<scene>/sparse/0, images_N)")
    p.add_argument("--models", type=Path, help="trained 3DGS outputs (DIR/<scene>/point_cloud/...); "
                   "default: --data")
    p.add_argument("--synthetic", action="store_true", help="synthetic presets instead of the dataset")
    speed = p.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true", help="few views / small presets (<= 2 minutes on 2 cores)")
    speed.add_argument("--smoke", action="store_true", help="tiny synthetic presets, 1 view (seconds)")
    p.add_argument("--scenes", default=",".join(OUTDOOR + INDOOR),
                   help="comma list of scenes (real data: also any folder name under --data)")
    p.add_argument("--images", default=None, metavar="NAME",
                   help="image folder of every real scene (default: images_4 outdoor / images_2 indoor "
                        "for the release, images for a scene made by `gsrender prepare`)")
    p.add_argument("--white-bg", action="store_true", help="white background (default black)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--warmup", type=int, default=None, help="untimed renders before each scene")
    p.add_argument("--max-views", type=int, default=None, help="evaluate at most this many test views")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bars")
    p.add_argument("--out", type=Path, default=Path("out/mipnerf360"), help="output folder")
    return p


def run(args) -> dict:
    cfg = dict(CONFIGS["smoke" if args.smoke else "quick" if args.quick else "full"])
    if args.warmup is not None:
        cfg["warmup"] = args.warmup
    if args.max_views is not None:
        cfg["max_views"] = args.max_views
    names = [s.strip() for s in args.scenes.split(",") if s.strip()]
    synthetic = args.synthetic or args.data is None
    unknown = sorted(set(names) - set(OUTDOOR + INDOOR))
    if unknown and synthetic:
        raise ValueError(f"--scenes: unknown scene(s) {unknown}; expected names from {OUTDOOR + INDOOR}")
    if not names or any("/" in n or n in (".", "..") for n in names):
        raise ValueError(f"--scenes: expected a comma list of scene folder names, got {args.scenes!r}")
    if args.images is not None and not re.fullmatch(r"images(_\d+)?", args.images):
        raise ValueError(f"--images: expected 'images' or 'images_N', got {args.images!r}")
    if cfg["warmup"] < 0 or (cfg["max_views"] is not None and cfg["max_views"] < 1):
        raise ValueError("--warmup must be >= 0 and --max-views >= 1")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    bg_color = torch.ones(3) if args.white_bg else torch.zeros(3)
    t0 = time.perf_counter()
    if synthetic:
        scenes = synthetic_scenes(names, cfg, bg_color)
    else:
        if not args.data.is_dir():
            raise ValueError(f"--data: no such folder {str(args.data)!r}")
        scenes = real_scenes(args.data, args.models or args.data, names, bg_color, cfg["max_views"],
                             args.images)
        if not scenes:
            raise ValueError(f"--data: none of {names} found with a trained model under "
                             f"{args.models or args.data}")
    lp = lpips_fn(device)
    rows = []
    for sd in scenes:
        pairs = [] if sd.source != "synthetic" else None
        rows.append(evaluate(sd, bg_color, device, cfg["warmup"], lp, not args.no_progress, pairs))
        if pairs:
            rows[-1]["strip"] = str(save_strip(args.out / f"{sd.name}_strip.png", pairs))
    return {"source": "synthetic" if synthetic else "mipnerf360", "scenes": rows, "means": group_means(rows),
            "settings": {"background": "white" if args.white_bg else "black", "warmup": cfg["warmup"],
                         "max_views": cfg["max_views"], "llff_hold": 8, "iteration": ITERATION,
                         "images": args.images or IMAGES, "lpips": "vgg" if lp is not None else "n/a",
                         "config": "smoke" if args.smoke else "quick" if args.quick else "full",
                         "data": None if synthetic else str(args.data)},
            "env": env_block(device), "total_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = run(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(args.out / "results.json", json.dumps(result, indent=2))
    md = markdown(result)
    (args.out / "results.md").write_text(md)
    print(md)
    print(f"wrote {args.out / 'results.json'} and {args.out / 'results.md'} ({result['total_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
