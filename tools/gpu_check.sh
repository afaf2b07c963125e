#!/usr/bin/env bash
# One command for a bare GPU machine with torch preinstalled (no internet): build gsrender in
# place for this device, run the CUDA tests, time gsrender.rasterize on CUDA vs CPU for a
# synthetic scene at D in {0, 32, 128}, and write gpu_check.json + gpu_check.log to $OUT (or
# ./gpu_out). Budget: about 8 minutes in all (build ~4-5 min on 16 cores, tests, timing).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
: >"$LOG"
log() { echo "[$(date +%T)] $*" | tee -a "$LOG"; }

export MAX_JOBS=${MAX_JOBS:-$(nproc)}
if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
  TORCH_CUDA_ARCH_LIST=$("$PY" -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())")
  export TORCH_CUDA_ARCH_LIST
fi
log "device: $("$PY" -c 'import torch; print(torch.cuda.get_device_name(0), torch.__version__, torch.version.cuda)' 2>&1)"
log "build: TORCH_CUDA_ARCH_LIST=$TORCH_CUDA_ARCH_LIST MAX_JOBS=$MAX_JOBS"
t0=$(date +%s)
GSRENDER_PTXAS_VERBOSE=1 timeout 330 "$PY" setup.py build_ext --inplace >"$OUT/build.log" 2>&1
build_rc=$?
log "build rc=$build_rc in $(( $(date +%s) - t0 )) s (full log: build.log)"
grep -E "error|warning" "$OUT/build.log" | sort -u | head -40 | tee -a "$LOG"

test_rc=-1
if [ $build_rc -eq 0 ]; then
  t0=$(date +%s)
  timeout 150 "$PY" -m pytest -m cuda -q -p no:cacheprovider tests >"$OUT/pytest.log" 2>&1
  test_rc=$?
  log "pytest -m cuda rc=$test_rc in $(( $(date +%s) - t0 )) s"
  tail -40 "$OUT/pytest.log" | tee -a "$LOG"
fi

bench_rc=-1
if [ $build_rc -eq 0 ]; then
  timeout 120 "$PY" - "$OUT/timing.json" <<'PYEOF' 2>&1 | tee -a "$LOG"
import json, sys, time
import torch
import gsrender
from gsrender import synthetic

def timed(fn, device, reps):
    fn()  # warm-up (and compile caches)
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e3

results = []
W, H = 480, 360
viewmats, Ks = synthetic.orbit_cameras(1, radius=6.0, height=2.5, width=W, height_px=H)
for D in (0, 32, 128):
    scene = synthetic.make_scene(50_000, feature_dim=D, seed=0)
    row = {"D": D, "N": scene.num_gaussians, "width": W, "height": H}
    for device in ("cuda", "cpu"):
        sc = scene.to(device)
        vm, K = viewmats.float().to(device), Ks.float().to(device)
        def fwd():
            return gsrender.rasterize(sc.means, sc.quats, sc.scales, sc.opacities, sc.sh, vm, K,
                                      W, H, sh_degree=scene.sh_degree,
                                      features=sc.features if D else None, backend=device)
        row[f"{device}_fwd_ms"] = timed(fwd, device, 10 if device == "cuda" else 2)
        leaves = [t.clone().requires_grad_(True) for t in (sc.means, sc.scales, sc.opacities, sc.sh)]
        def fwd_bwd():
            out = gsrender.rasterize(leaves[0], sc.quats, leaves[1], leaves[2], leaves[3], vm, K,
                                     W, H, sh_degree=scene.sh_degree,
                                     features=sc.features if D else None, backend=device)
            loss = out.colors.sum() + (out.features.sum() if D else 0)
            loss.backward()
        row[f"{device}_fwd_bwd_ms"] = timed(fwd_bwd, device, 5 if device == "cuda" else 1)
        if device == "cuda":
            out = fwd()
            row["n_intersections"] = int(out.meta["n_intersections"])
            img_gpu = out.colors.cpu()
        else:
            img_cpu = fwd().colors
            row["max_abs_diff_rgb"] = float((img_gpu - img_cpu).abs().max())
    row["speedup_fwd"] = row["cpu_fwd_ms"] / row["cuda_fwd_ms"]
    print(json.dumps(row), flush=True)
    results.append(row)
json.dump(results, open(sys.argv[1], "w"), indent=1)
PYEOF
  bench_rc=${PIPESTATUS[0]}
  log "timing rc=$bench_rc"
fi

"$PY" - "$OUT" "$build_rc" "$test_rc" "$bench_rc" <<'PYEOF'
import json, os, sys
out, build_rc, test_rc, bench_rc = sys.argv[1], *map(int, sys.argv[2:5])
timing = os.path.join(out, "timing.json")
summary = {"build_rc": build_rc, "pytest_rc": test_rc, "timing_rc": bench_rc,
           "timing": json.load(open(timing)) if os.path.exists(timing) else None}
json.dump(summary, open(os.path.join(out, "gpu_check.json"), "w"), indent=1)
print(json.dumps(summary, indent=1))
PYEOF
[ $build_rc -eq 0 ] && [ $test_rc -eq 0 ] && [ $bench_rc -eq 0 ]
