"""The CUDA kernels' standard case set through the SIMT CPU runtime (docs/cuda.md): writes the set
(python -m gsrender.testing.make_cases), builds the SIMT driver (tools/kernel_driver/build.sh
--simt), runs every case scene by scene (one driver process at a time, its CPU time per scene),
checks them (python -m gsrender.testing.check --expected), and measures the headroom the
checker's bars leave: per precision the worst value error and the worst 1 − cosine of the
gradients, whole arrays and their parts (channels, groups of Gaussians by list position).
Writes kernel_cases.json.

    python benchmarks/kernel_cases.py [--cases build/kernel_cases] [--out out/kernel_cases]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import gsrender from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from benchmarks.common import ROOT, env_block
from gsrender.io import atomic
from gsrender.testing.case import list_cases, read_case
from gsrender.testing.check import _grad_verdict, _groups, _norm_err, compare_array, longest_list

SCENES = ("tiny", "small", "crowd", "deep", "large")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False, **kw)
    if proc.returncode:
        raise SystemExit(f"kernel_cases: {' '.join(cmd[:3])} ... failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return proc


def _keep_worst(worst: dict, key: tuple, value: float, where: str, bar: float) -> None:
    if key not in worst or value > worst[key]["value"]:
        worst[key] = {"value": value, "case": where, "bar": bar}


def headroom(cases: Path, results: Path) -> dict:
    """Per (precision, metric): the worst value over the set, where, and the checker's bar.
    Metrics: value error (normalised max |out − exp|; where the rule allows a share of elements
    past its bound, that share and the largest error instead), and 1 − cos of the gradients for
    whole arrays and for their parts."""
    worst = {}
    for r in list_cases(results):
        out = read_case(r, sections=("outputs",))
        exp = read_case(cases / out.name, sections=("expected",))
        groups = _groups(cases / out.name) if any("groups" in x for x in exp.compare.values()) else None
        for name, rule in exp.compare.items():
            o = out.arrays["outputs"][name].astype(np.float64)
            e = exp.arrays["expected"][name].astype(np.float64)
            where = f"{out.name}: {name}"
            if rule["kind"] == "value" and e.size:
                err = _norm_err(o, e, rule.get("per_channel", False))
                if "outliers" in rule:  # elements past tol are allowed up to a share, within tol_max
                    _keep_worst(worst, (exp.precision, "value_share"), float(np.mean(err > rule["tol"])), where,
                                rule["outliers"])
                    _keep_worst(worst, (exp.precision, "value_max"), float(err.max()), where, rule["tol_max"])
                else:
                    _keep_worst(worst, (exp.precision, "value"), float(err.max()), where, rule["tol"])
            elif rule["kind"] == "grad" and np.linalg.norm(e) > 0:
                whole = _grad_verdict(name, o, e, rule["cos"], rule["norm"])
                _keep_worst(worst, (exp.precision, "grad"), 1 - whole.cos, where, 1 - rule["cos"])
                part = rule.get("channels") or rule.get("groups")
                if part:
                    v = compare_array(name, out.arrays["outputs"][name], exp.arrays["expected"][name], rule, groups)
                    _keep_worst(worst, (exp.precision, "grad_part"), 1 - v.cos, where, 1 - part["cos"])
    return {f"{p}/{m}": v for (p, m), v in sorted(worst.items())}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default=str(ROOT / "build" / "kernel_cases"))
    p.add_argument("--driver", default=str(ROOT / "build" / "kernel_driver_simt"))
    p.add_argument("--out", default="out/kernel_cases")
    args = p.parse_args(argv)
    out, cases, driver = Path(args.out).resolve(), Path(args.cases).resolve(), Path(args.driver).resolve()
    py = sys.executable
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0, c0 = time.perf_counter(), _children_cpu()
    _run([py, "-m", "gsrender.testing.make_cases", str(cases)], env=env)
    make_cases = {"wall_s": time.perf_counter() - t0, "cpu_s": _children_cpu() - c0}
    build_env = dict(env, CXX=os.environ.get("CXX", "/usr/lib/ccache/g++" if Path("/usr/lib/ccache/g++").exists() else "g++"))
    _run(["bash", "tools/kernel_driver/build.sh", "--simt", str(driver)], env=build_env)
    results = out / "results"
    scenes = {}
    for scene in SCENES:
        t0, c0 = time.perf_counter(), _children_cpu()
        _run([str(driver / "kernel_driver"), str(cases), str(results), "--only", f"_{scene}"])
        scenes[scene] = {"wall_s": time.perf_counter() - t0, "cpu_s": _children_cpu() - c0,
                         "cases": sum(1 for c in list_cases(cases) if f"_{scene}" in c.name)}
    check = subprocess.run([py, "-m", "gsrender.testing.check", str(results), "--expected", str(cases), "--quiet"],
                           cwd=ROOT, capture_output=True, text=True, check=False, env=env)
    summary = check.stdout.strip().splitlines()[-1] if check.stdout.strip() else f"checker exit {check.returncode}"
    size = sum(f.stat().st_size for f in cases.rglob("*") if f.is_file())
    res = {"env": env_block("cpu"), "n_cases": len(list_cases(cases)), "size_mb": size / 1e6,
           "longest_list": longest_list(cases)[0], "make_cases": make_cases, "scenes": scenes,
           "check_passed": check.returncode == 0, "check_summary": summary,
           "headroom": headroom(cases, results)}
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "kernel_cases.json", json.dumps(res, indent=1))
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
