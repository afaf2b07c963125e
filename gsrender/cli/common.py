"""What the `gsrender` subcommands share: CliError, device choice, the scene loader, the render
options (cameras: gsrender.cameras). Imports nothing of gsrender.cli, so any command (and the
trainer's viewer hook) can import it without a cycle."""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from gsrender import ops  # noqa: F401  (loads _C: the op schemas and kernels op_backends asks about)
from gsrender.contract import MODES
from gsrender.io import load_ply, load_splat
from gsrender.ops import PRECISIONS
from gsrender.scene import GaussianModel

OPS = ("project_fwd", "project_bwd", "sh_fwd", "sh_bwd", "bin_tiles", "rasterize_fwd", "rasterize_bwd",
       "contributors", "weight_stats")


class CliError(Exception):
    """A user-facing failure: printed as `gsrender: error: ...`, exit status 1."""


# ---------------------------------------------------------------------------------------------
# kernels and devices


def op_backends() -> dict[str, dict[str, bool]]:
    """For each op: whether the loaded extension registered a CPU / CUDA kernel for it."""
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


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------------------------------
# scenes and cameras


def load_model(path: str | Path) -> GaussianModel:
    path = Path(path)
    if not path.is_file():
        raise CliError(f"--scene: no such file {str(path)!r}")
    suffix = path.suffix.lower()
    if suffix == ".ply":
        return load_ply(path)
    if suffix == ".splat":
        return load_splat(path)
    raise CliError(f"--scene: expected a .ply or .splat file, got {str(path)!r}")


def default_up(scene: Path) -> str:
    # .splat files come from web viewers whose scenes stand upright along −y (the plant in
    # ../shared/data does); 3DGS PLYs from this package's synthetic scenes use +z up.
    return "-y" if scene.suffix.lower() == ".splat" else "+z"


def add_render_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=MODES, default="sorted", help="sorted (3DGS) or weighted (sort-free)")
    p.add_argument("--precision", choices=PRECISIONS, default="auto",
                   help="fp32 = exact scalar per-pixel path; others use the matrix path")
    p.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--max-views", type=int, default=None, metavar="N", help="render only the first N views")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
