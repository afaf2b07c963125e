"""`gsrender prepare IMAGES_DIR --out SCENE_DIR`: photos → an undistorted COLMAP model in the
Mip-NeRF 360 release's layout (`images/`, `images_2/`, `images_4/`, `images_8/`, `sparse/0/`),
the input of `gsrender train --colmap` and benchmarks/mipnerf360.py.

The stages follow 3DGS's convert.py, on the CPU through pycolmap (COLMAP's Python bindings):
SIFT features with one shared camera (the photos of a capture share a lens; without EXIF COLMAP
guesses the focal length, and bundle adjustment refines it), matching, incremental mapping,
undistortion to PINHOLE, then downscaled copies. Matching suits an ordered orbit capture: every
photo against its `overlap` successors and at power-of-two offsets (COLMAP's sequential
pairing, wrapped around the end of the sequence: an orbit ends where it began), plus all pairs of
keyframes (every `keyframe_every`-th photo) for the loops a vocabulary tree would find — the
tree's weights cannot be downloaded here, and exhaustive matching of 292 photos (42k pairs) takes
hours on 2 cores.

`--from-model DIR` starts from a model made earlier (its cameras, poses and points, as
`sfm_model` below writes them without 2-D observations): only undistortion and downscaling run.
`SCENE_DIR/prepare.json` lists every photo (the Mip-NeRF 360 hold-out counts every 8th of them,
registered or not), the ones SfM registered and the stages' statistics.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gsrender.io import atomic
from gsrender.sfm.manifest import MANIFEST

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
# A scene with fewer photos cannot have a held-out view and two training views.
MIN_IMAGES = 3


class PrepareError(ValueError):
    """A one-line reason why the photos cannot become a model."""


@dataclass
class PrepareConfig:
    camera_model: str = "SIMPLE_RADIAL"  # COLMAP's default: focal, principal point, one k
    max_features: int = 8192  # SIFT keypoints per photo (COLMAP's default)
    overlap: int = 10  # successors each photo is matched with (COLMAP's sequential default)
    keyframe_every: int = 6  # every N-th photo is matched against every other keyframe
    # the share of the photos SfM must register: below it the capture is broken (a second
    # disconnected model, blurred photos), not a scene to train on
    min_registered: float = 0.9
    downscales: tuple[int, ...] = (2, 4, 8)
    threads: int = -1  # COLMAP's threads (-1: all cores)
    seed: int = 0  # COLMAP's RANSAC and mapper seed
    # "global" (GLOMAP: the focal length from the view graph, rotation averaging, then all
    # positions at once) or "incremental" (COLMAP's mapper, one photo at a time). On the bonsai
    # orbit the incremental mapper registered every photo at 0.79 px, yet its camera centres lie
    # on no ring (a third of the orbit collapsed onto a point; a model trained on it draws the
    # bonsai beside its place in every view); the global mapper put all 292 on a ring (radius
    # 3.78 ± 0.45, the angle advancing photo by photo) at 0.36 px
    mapper: str = "global"


def list_images(images_dir: Path) -> list[str]:
    """The photo names in images_dir, sorted (the Mip-NeRF 360 protocol's order)."""
    if not images_dir.is_dir():
        raise PrepareError(f"IMAGES_DIR: {images_dir} is not a folder")
    names = sorted(p.name for p in images_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if len(names) < MIN_IMAGES:
        raise PrepareError(f"IMAGES_DIR: {images_dir} holds {len(names)} photos "
                           f"({'/'.join(IMAGE_SUFFIXES)}); at least {MIN_IMAGES} are needed")
    return names


def check_images(images_dir: Path, names: list[str]) -> tuple[int, int]:
    """Every photo decodes and all have one size; returns (width, height)."""
    import cv2

    size = None
    for name in names:
        img = cv2.imread(str(images_dir / name), cv2.IMREAD_UNCHANGED)
        if img is None:
            raise PrepareError(f"IMAGES_DIR: {images_dir / name} is not a readable image")
        hw = img.shape[:2]
        if size is None:
            size = hw
        elif hw != size:
            raise PrepareError(f"IMAGES_DIR: {name} is {hw[1]}x{hw[0]}, the first photo "
                               f"{size[1]}x{size[0]}: one shared camera needs one size")
    return size[1], size[0]


def check_out(images_dir: Path, scene: Path, cfg: PrepareConfig) -> None:
    """The photos must not lie in a folder `prepare` replaces (SCENE_DIR/images, images_F,
    sparse, sfm_model): `gsrender prepare myscene/images --out myscene` would delete them."""
    src = images_dir.resolve()
    for name in ("images", *(f"images_{f}" for f in cfg.downscales), "sparse", "sfm_model"):
        dst = (scene / name).resolve()
        if src == dst or dst in src.parents:
            raise PrepareError(f"--out: {scene} would replace {dst}, where the photos are; "
                               f"write the scene to another folder")


def orbit_pairs(n: int, overlap: int, keyframe_every: int) -> list[tuple[int, int]]:
    """Index pairs (i < j) to match: sequential with quadratic offsets, wrapped, plus keyframes
    exhaustively."""
    pairs = set()
    offsets = set(range(1, overlap + 1)) | {2 ** k for k in range(overlap) if 2 ** k < n}
    for i in range(n):
        for d in offsets:
            j = (i + d) % n
            if j != i:
                pairs.add((min(i, j), max(i, j)))
    keys = list(range(0, n, max(1, keyframe_every)))
    pairs.update((a, b) for k, a in enumerate(keys) for b in keys[k + 1:])
    return sorted(pairs)


class _Bar:
    """A tqdm bar (or nothing when quiet)."""

    def __init__(self, total: int, desc: str, quiet: bool):
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=desc, unit="img" if "pairs" not in desc else "pair",
                        disable=quiet, dynamic_ncols=True)

    def __enter__(self):
        return self.bar

    def __exit__(self, *exc):
        self.bar.close()


def extract(db: Path, images_dir: Path, names: list[str], cfg: PrepareConfig, quiet: bool) -> None:
    """SIFT features of every photo, one shared camera (a chunk at a time, for the progress bar)."""
    import pycolmap

    ext = pycolmap.FeatureExtractionOptions()
    ext.sift.max_num_features = cfg.max_features
    ext.num_threads = cfg.threads
    chunk = 16
    with _Bar(len(names), "features", quiet) as bar:
        for s in range(0, len(names), chunk):
            reader = pycolmap.ImageReaderOptions()
            reader.camera_model = cfg.camera_model
            if s > 0:
                reader.existing_camera_id = 1  # the camera the first chunk created
            pycolmap.extract_features(db, images_dir, image_names=names[s:s + chunk],
                                      camera_mode=pycolmap.CameraMode.SINGLE,
                                      reader_options=reader, extraction_options=ext,
                                      device=pycolmap.Device.cpu)
            bar.update(len(names[s:s + chunk]))


def match(db: Path, names: list[str], cfg: PrepareConfig, work: Path, quiet: bool) -> int:
    """Matches and two-view geometry of the orbit pairs; returns the pairs' count."""
    import pycolmap

    pairs = orbit_pairs(len(names), cfg.overlap, cfg.keyframe_every)
    opts = pycolmap.FeatureMatchingOptions()
    opts.num_threads = cfg.threads
    verify = pycolmap.TwoViewGeometryOptions()
    verify.ransac.random_seed = cfg.seed
    chunk = 400
    with _Bar(len(pairs), "matching pairs", quiet) as bar:
        for s in range(0, len(pairs), chunk):
            part = pairs[s:s + chunk]
            path = work / "pairs.txt"
            path.write_text("".join(f"{names[i]} {names[j]}\n" for i, j in part))
            pycolmap.match_image_pairs(db, matching_options=opts,
                                       pairing_options=pycolmap.ImportedPairingOptions(match_list_path=str(path)),
                                       verification_options=verify, device=pycolmap.Device.cpu)
            bar.update(len(part))
    return len(pairs)


def _has_features(db: Path, n: int) -> bool:
    """Whether db holds keypoints of all n photos (an earlier run's extraction)."""
    import pycolmap

    if not db.is_file():
        return False
    d = pycolmap.Database.open(str(db))
    try:
        return d.num_images() == n and all(d.exists_keypoints(i.image_id) for i in d.read_all_images())
    finally:
        d.close()


def _matched_pairs(db: Path) -> int:
    import pycolmap

    d = pycolmap.Database.open(str(db))
    try:
        return d.num_matched_image_pairs()
    finally:
        d.close()


def reconstruct(db: Path, images_dir: Path, work: Path, n_images: int, cfg: PrepareConfig,
                quiet: bool):
    """Mapping (cfg.mapper); the largest model."""
    import pycolmap

    out = work / "sparse"
    out.mkdir(exist_ok=True)
    if cfg.mapper == "global":
        # the global mapper needs the focal length (it decomposes each pair's essential matrix):
        # photos without EXIF carry only COLMAP's guess, 1.2 x the longer side, so the focal is
        # first estimated from all pairs' fundamental matrices (GLOMAP's view-graph calibration)
        with _Bar(1, "calibrating the focal length", quiet) as bar:
            if not pycolmap.calibrate_view_graph(str(db)):
                raise PrepareError("the focal length could not be estimated from the photos' matches "
                                   "(too few pairs agree): try --mapper incremental")
            bar.update(1)
        opts = pycolmap.GlobalPipelineOptions()
        opts.num_threads = cfg.threads
        opts.random_seed = cfg.seed
        with _Bar(1, "mapping (global)", quiet) as bar:
            models = pycolmap.global_mapping(db, images_dir, out, options=opts)
            bar.update(1)
    else:
        opts = pycolmap.IncrementalPipelineOptions()
        opts.num_threads = cfg.threads
        opts.random_seed = cfg.seed
        with _Bar(n_images, "mapping", quiet) as bar:
            models = pycolmap.incremental_mapping(db, images_dir, out, options=opts,
                                                  next_image_callback=lambda: bar.update(1))
    if not models:
        raise PrepareError("SfM registered no photos: the photos share too few matches "
                           "(too little overlap between neighbours, or not one scene)")
    return max(models.values(), key=lambda r: r.num_reg_images())


def read_model(model_dir: Path, names: list[str]):
    """A COLMAP model (text or binary) made earlier from these photos (`--from-model`)."""
    import pycolmap

    if not all(any((model_dir / f"{stem}{ext}").is_file() for ext in (".txt", ".bin"))
               for stem in ("cameras", "images", "points3D")):
        raise PrepareError(f"--from-model: {model_dir} holds no COLMAP model (cameras, images, "
                           f"points3D .txt or .bin)")
    try:
        rec = pycolmap.Reconstruction(str(model_dir))
    except (RuntimeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PrepareError(f"--from-model: {model_dir} cannot be read ({first})") from None
    known = set(names)
    alien = sorted(rec.image(i).name for i in rec.reg_image_ids() if rec.image(i).name not in known)
    if alien:
        raise PrepareError(f"--from-model: {model_dir} registers {len(alien)} images that are not "
                           f"among the photos, e.g. {', '.join(alien[:3])}")
    return rec


def check_registered(rec, names: list[str], cfg: PrepareConfig) -> list[str]:
    """The names SfM registered; raises when they are fewer than cfg.min_registered."""
    reg = sorted(rec.image(i).name for i in rec.reg_image_ids())
    share = len(reg) / len(names)
    if share < cfg.min_registered:
        missing = sorted(set(names) - set(reg))
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise PrepareError(f"SfM registered {len(reg)} of {len(names)} photos ({share:.0%} < "
                           f"{cfg.min_registered:.0%}); not registered: {shown}")
    return reg


def strip_observations(sparse: Path) -> None:
    """Rewrite a text model without its 2-D observations and tracks (the committed form: poses,
    intrinsics and 3-D points with their colours and errors)."""
    lines, out, expect_points = (sparse / "images.txt").read_text().splitlines(), [], False
    for line in lines:
        if line.startswith("#"):
            out.append(line)
            continue
        out.append("" if expect_points else line)
        expect_points = not expect_points
    (sparse / "images.txt").write_text("\n".join(out) + "\n")
    pts = []
    for line in (sparse / "points3D.txt").read_text().splitlines():
        if line.startswith("#"):
            pts.append(line)
            continue
        # 0.1 mm at a metre's scale and 0.01 px are below what SfM resolves: half the file's size
        pid, x, y, z, r, g, b, err = line.split()[:8]
        pts.append(f"{pid} {float(x):.4f} {float(y):.4f} {float(z):.4f} {r} {g} {b} {float(err):.2f}")
    (sparse / "points3D.txt").write_text("\n".join(pts) + "\n")


def undistort(model_dir: Path, images_dir: Path, scene: Path, work: Path, cfg: PrepareConfig,
              quiet: bool) -> None:
    """scene/images (PINHOLE, undistorted) and scene/sparse/0 from a distorted model."""
    import pycolmap

    tmp = work / "undistorted"
    with _Bar(1, "undistorting", quiet) as bar:
        pycolmap.undistort_images(tmp, model_dir, images_dir, num_threads=cfg.threads)
        bar.update(1)
    sparse = scene / "sparse" / "0"
    if sparse.exists():
        shutil.rmtree(sparse)
    sparse.mkdir(parents=True)
    for f in (tmp / "sparse").iterdir():
        shutil.move(str(f), sparse / f.name)
    dst = scene / "images"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.move(str(tmp / "images"), dst)


def downscale(scene: Path, factors: tuple[int, ...], quiet: bool) -> None:
    """images_F: each undistorted image resized by 1/F (area averaging), as the release ships."""
    import cv2

    src = scene / "images"
    names = sorted(p.name for p in src.iterdir())
    with _Bar(len(names) * len(factors), "downscaling", quiet) as bar:
        for f in factors:
            dst = scene / f"images_{f}"
            dst.mkdir(exist_ok=True)
            for name in names:
                img = cv2.imread(str(src / name), cv2.IMREAD_COLOR)
                h, w = img.shape[:2]
                small = cv2.resize(img, (max(1, round(w / f)), max(1, round(h / f))),
                                   interpolation=cv2.INTER_AREA)
                cv2.imwrite(str(dst / name), small, [cv2.IMWRITE_JPEG_QUALITY, 95])
                bar.update(1)


def model_stats(rec) -> dict:
    """The model's counts, errors and cameras (the manifest's keys beside the photo lists). A model
    without observations (sfm_model, `--from-model`) keeps its points' stored errors but has no
    tracks: its mean track length is None."""
    tracks = rec.compute_num_observations() > 0
    return {"n_registered": rec.num_reg_images(), "points3D": rec.num_points3D(),
            "mean_reprojection_error_px": float(rec.compute_mean_reprojection_error()),
            "mean_track_length": float(rec.compute_mean_track_length()) if tracks else None,
            "cameras": {int(k): {"model": c.model.name, "width": c.width, "height": c.height,
                                 "params": [float(v) for v in c.params]}
                        for k, c in rec.cameras.items()}}


def prepare(images_dir: str | Path, scene: str | Path, cfg: PrepareConfig | None = None,
            from_model: str | Path | None = None, quiet: bool = False) -> dict:
    """The whole pipeline; returns the manifest it writes to scene/prepare.json."""
    import pycolmap

    cfg = cfg or PrepareConfig()
    images_dir, scene = Path(images_dir), Path(scene)
    names = list_images(images_dir)
    check_out(images_dir, scene, cfg)
    width, height = check_images(images_dir, names)
    scene.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=scene, prefix=".prepare-") as tmp:
        work = Path(tmp)
        t = time.perf_counter()
        if from_model is not None:
            rec = read_model(Path(from_model), names)
            model_dir = Path(from_model)
            n_pairs = None
        else:
            # kept, as 3DGS's convert.py keeps distorted/database.db: a second mapping of the same
            # photos (another --mapper) starts from its features and matches
            db = scene / "distorted" / "database.db"
            db.parent.mkdir(exist_ok=True)
            if not _has_features(db, len(names)):
                if db.exists():
                    db.unlink()
                extract(db, images_dir, names, cfg, quiet)
            times["features_s"] = time.perf_counter() - t
            t = time.perf_counter()
            n_pairs = len(orbit_pairs(len(names), cfg.overlap, cfg.keyframe_every))
            if _matched_pairs(db) < n_pairs:
                match(db, names, cfg, work, quiet)
            times["matching_s"] = time.perf_counter() - t
            t = time.perf_counter()
            rec = reconstruct(db, images_dir, work, len(names), cfg, quiet)
            times["mapping_s"] = time.perf_counter() - t
            model_dir = work / "model"
            model_dir.mkdir()
            rec.write_text(str(model_dir))
        registered = check_registered(rec, names, cfg)
        stats = model_stats(rec)
        # the model made here, in the form `--from-model` takes (kept beside the scene)
        kept = scene / "sfm_model"
        if from_model is None:
            if kept.exists():
                shutil.rmtree(kept)
            shutil.copytree(model_dir, kept)
            strip_observations(kept)
        t = time.perf_counter()
        undistort(model_dir, images_dir, scene, work, cfg, quiet)
        downscale(scene, cfg.downscales, quiet)
        times["undistort_downscale_s"] = time.perf_counter() - t
    manifest = {
        "images_dir": str(images_dir), "photos": names, "photo_size": [width, height],
        "registered": registered, "not_registered": sorted(set(names) - set(registered)),
        "registered_share": len(registered) / len(names), "pairs_matched": n_pairs,
        "from_model": None if from_model is None else str(from_model),
        "config": asdict(cfg), "seconds": times, "pycolmap": pycolmap.__version__, **stats,
    }
    atomic.write_json(scene / MANIFEST, manifest, indent=1)
    return manifest


def build_parser(prog: str = "gsrender prepare") -> argparse.ArgumentParser:
    d = PrepareConfig()
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    p.add_argument("images", metavar="IMAGES_DIR", help="folder of the photos (jpg/png), sorted by name")
    p.add_argument("--out", required=True, metavar="SCENE_DIR", help="scene folder to write")
    p.add_argument("--from-model", metavar="DIR", default=None,
                   help="a COLMAP model of these photos made earlier (e.g. SCENE_DIR/sfm_model or "
                        "the committed data/scenes/NAME/sfm_model): skip SfM")
    p.add_argument("--camera-model", default=d.camera_model, help=f"COLMAP camera model ({d.camera_model})")
    p.add_argument("--mapper", choices=("global", "incremental"), default=d.mapper,
                   help=f"global (GLOMAP) or incremental (COLMAP) mapping ({d.mapper})")
    p.add_argument("--max-features", type=int, default=d.max_features)
    p.add_argument("--overlap", type=int, default=d.overlap)
    p.add_argument("--keyframe-every", type=int, default=d.keyframe_every)
    p.add_argument("--min-registered", type=float, default=d.min_registered,
                   help=f"fail below this share of photos registered ({d.min_registered})")
    p.add_argument("--threads", type=int, default=d.threads)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--verbose", action="store_true",
                   help="COLMAP's own log (INFO) on stderr; default: its warnings and errors only")
    return p


def main(argv: list[str] | None = None, prog: str = "gsrender prepare") -> int:
    args = build_parser(prog).parse_args(argv)
    cfg = PrepareConfig(camera_model=args.camera_model, max_features=args.max_features,
                        overlap=args.overlap, keyframe_every=args.keyframe_every,
                        min_registered=args.min_registered, threads=args.threads,
                        mapper=args.mapper)
    try:
        import pycolmap
    except ImportError:
        print(f"{prog}: error: needs pycolmap (pip install pycolmap, or the project's `sfm` extra)",
              file=sys.stderr)
        return 1
    if not args.verbose:  # COLMAP logs every image and bundle adjustment at INFO
        pycolmap.logging.minloglevel = int(pycolmap.logging.Level.WARNING)
    try:
        m = prepare(args.images, args.out, cfg, from_model=args.from_model, quiet=args.no_progress)
    except PrepareError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    print(f"registered {len(m['registered'])} of {len(m['photos'])} photos, {m['points3D']} points, "
          f"reprojection error {m['mean_reprojection_error_px']:.3f} px; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
