"""The `gsrender` command (also `python -m gsrender`): demo, render, info, view, bench, prepare, train,
loc, voda.

    gsrender demo [--out out/demo] [--scene data/sample] [--max-views N]
    gsrender render --scene scene.ply|scene.splat [--colmap DIR | --cameras-json FILE | --orbit N] ...
    gsrender info [--json]
    gsrender view SCENE.ply|SCENE.splat [--colmap DIR] [--host H] [--port P]
    gsrender prepare IMAGES_DIR --out SCENE_DIR [--from-model DIR] ...

Each command group registers its arguments from its own module of this package (add_parser);
bench, prepare and train parse their own options (gsrender/bench/fps.py, gsrender/sfm/prepare.py,
gsrender/train/run.py).
"""
from __future__ import annotations

import argparse
import sys

import gsrender
from gsrender.cli import bench, demo, info, loc, render, view, voda
from gsrender.cli.common import CliError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gsrender", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"gsrender {gsrender.__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="{demo,render,info,view,bench,prepare,train,loc,voda}")
    demo.add_parser(sub)
    render.add_parser(sub)
    info.add_parser(sub)
    view.add_parser(sub)  # imports viser only when run
    bench.add_parser(sub)
    # parsed by gsrender/sfm/prepare.py and gsrender/train/run.py (see main); listed here for --help
    sub.add_parser("prepare", help="photos -> an undistorted COLMAP scene, SfM with pycolmap "
                   "(`gsrender prepare --help`)", add_help=False)
    sub.add_parser("train", help="train a 3DGS scene (`gsrender train --help`)", add_help=False)
    loc.add_parser(sub)  # SplitGS-Loc: `gsrender loc build|query`
    voda.add_parser(sub)  # VODA: `gsrender voda`
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # every option after it belongs to the fps harness
        return bench.cmd_bench(argv[1:])
    if argv[:1] == ["prepare"]:  # every option after it belongs to gsrender.sfm.prepare
        from gsrender.sfm.prepare import main as prepare_main

        return prepare_main(argv[1:], prog="gsrender prepare")
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
