"""Side-by-side A/B of two gsrender builds on the benchmark scene (benchmarks/common.py
random_box_scene, benchmarks/cpu_render.py target_cases): alternating subprocesses, one per build per round, so both see the
same machine load; prints each build's medians over the rounds and the ratio (outside_ms: the
forward's time outside its timed stages — input checks, glue, freeing its outputs). --stages: the
per-Gaussian stages alone (project, sh, bin; benchmarks/cpu_stages_loop.py, the raster stubbed),
cheap enough for 1M Gaussians. --project: the projection op alone (pinhole, float32, one camera),
its process CPU time (run with OMP_NUM_THREADS=1).

    python benchmarks/cpu_ab.py --base /work/main [--new .] [--rounds 2] [--n 100000] [--D 0,64] [--no-train]
    python benchmarks/cpu_ab.py --base /work/main --stages --n 1000000 [--size 512]
    OMP_NUM_THREADS=1 python benchmarks/cpu_ab.py --base /work/main --project --n 300000 --rounds 8 --runs 15
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
CHILD = r'''
import sys, json, importlib.util
root, bench, n, ds, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5])
train, cpu = sys.argv[6] == "1", sys.argv[7] == "1"
sys.path.insert(0, root)
import gsrender
assert gsrender.__file__.startswith(root), gsrender.__file__
spec = importlib.util.spec_from_file_location("cpu_render", bench)
cr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cr)
sc = cr.random_box_scene(n, 512)
rows = cr.target_cases(sc, ds, runs, 1, train=train)
if cpu:  # the forward's process CPU time (one thread: no barrier spins), less load-sensitive than wall
    import statistics, time, torch
    t = {k: sc[k] for k in ("means", "quats", "scales", "opacities", "sh")}
    size = int(sc["K"][0, 0, 2] * 2)
    for row, d in zip(rows, ds):
        feats = torch.rand(n, d, generator=torch.Generator().manual_seed(d)) if d else None
        ts = []
        with torch.no_grad():
            for i in range(runs + 1):
                t0 = time.process_time()
                cr.render_scene(t, feats, sc["viewmat"], sc["K"], size, size, "sorted", "auto", False)
                if i:
                    ts.append((time.process_time() - t0) * 1e3)
        row["fwd_cpu_ms"] = statistics.median(ts)
print(json.dumps(rows))
'''
# --stages: argv as CHILD's, ds = [size]
STAGES_CHILD = r'''
import sys, json, importlib.util
root, bench, n, ds, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5])
sys.path.insert(0, root)
import gsrender
assert gsrender.__file__.startswith(root), gsrender.__file__
spec = importlib.util.spec_from_file_location("cpu_stages_loop", bench.replace("cpu_render.py", "cpu_stages_loop.py"))
sl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sl)
assert sl.ops.__file__.startswith(root), sl.ops.__file__
print(json.dumps([sl.stages_case(n, ds[0], runs)]))
'''
# --project: argv as CHILD's, ds = [size]
PROJECT_CHILD = r'''
import sys, json, statistics, time, importlib.util
root, bench, n, ds, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5])
sys.path.insert(0, root)
import torch, gsrender
assert gsrender.__file__.startswith(root), gsrender.__file__
spec = importlib.util.spec_from_file_location("cpu_render", bench)
cr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cr)
sc = cr.issue_scene(n, ds[0])
args = [sc[k].contiguous() for k in ("means", "quats", "scales", "opacities")]
args += [sc["viewmat"].contiguous(), sc["K"].contiguous(), ds[0], ds[0], 0.3, 0.01, 1e10, 0.0, False]
ts = []
with torch.no_grad():
    for i in range(runs + 2):
        t0 = time.process_time()
        torch.ops.gsrender.project_fwd(*args)
        if i >= 2:
            ts.append((time.process_time() - t0) * 1e3)
print(json.dumps([{"project_cpu_ms": statistics.median(ts)}]))
'''
KEYS = ("fwd_ms", "fwd_cpu_ms", "outside_ms", "fwd_bwd_ms", "stages_ms.project", "stages_ms.sh", "stages_ms.bin",
        "stages_ms.raster_fwd", "pairs", "pairs_computed", "pairs_contributing")
STAGE_KEYS = ("per_gaussian_ms", "stages_ms.project", "stages_ms.sh", "stages_ms.bin", "pairs")


def _get(c: dict, key: str):
    if key == "outside_ms":  # the forward's time outside its timed stages (checks, glue, frees)
        return c["fwd_ms"] - sum(c["stages_ms"].values())
    a, _, b = key.partition(".")
    return c[a][b] if b else c[a]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", required=True, help="checkout whose gsrender (built in place) is the baseline")
    p.add_argument("--new", default=str(HERE.parents[1]), help="checkout under test (default: this one)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--runs", type=int, default=3, help="timed runs per case (median)")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--D", default="0,64", help="feature widths, comma-separated")
    p.add_argument("--stages", action="store_true", help="the per-Gaussian stages alone (RGB)")
    p.add_argument("--project", action="store_true", help="the projection op alone (CPU time)")
    p.add_argument("--size", type=int, default=512, help="--stages / --project: the image side")
    p.add_argument("--no-train", action="store_true", help="forward only (no forward + backward)")
    p.add_argument("--cpu", action="store_true", help="also the forward's process CPU time "
                   "(fwd_cpu_ms; run with OMP_NUM_THREADS=1)")
    a = p.parse_args(argv)
    roots = {"base": str(Path(a.base).resolve()), "new": str(Path(a.new).resolve())}
    ds = [a.size] if a.stages or a.project else [int(d) for d in a.D.split(",")]
    child, keys = ((STAGES_CHILD, STAGE_KEYS) if a.stages else
                   (PROJECT_CHILD, ("project_cpu_ms",)) if a.project else (CHILD, KEYS))
    res: dict[str, list] = {k: [] for k in roots}
    for r in range(a.rounds):
        for name in (list(roots) if r % 2 == 0 else list(roots)[::-1]):
            out = subprocess.run([sys.executable, "-c", child, roots[name], str(HERE.with_name("cpu_render.py")),
                                  str(a.n), json.dumps(ds), str(a.runs), "0" if a.no_train else "1",
                                  "1" if a.cpu else "0"],
                                 capture_output=True, text=True)
            if out.returncode:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            res[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for i, d in enumerate(ds):
        for key in keys:
            if key == "fwd_bwd_ms" and a.no_train or key == "fwd_cpu_ms" and not a.cpu:
                continue
            m = {k: statistics.median(_get(x[i], key) for x in v) for k, v in res.items()}
            print(f"{'size' if a.stages or a.project else 'D'}={d} {key}: base {m['base']:.1f}  new {m['new']:.1f}  base/new {m['base'] / m['new']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
