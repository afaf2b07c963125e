#!/usr/bin/env bash
# One command for a bare GPU machine with torch preinstalled (no internet): build gsrender in
# place for this device, run the CUDA tests (CUDA vs the CPU backend), run the channel sweep and
# the FPS harness on CUDA (Tensor Core precisions vs the scalar kernel vs gsplat when importable),
# and write gpu_check.json + gpu_check.log (+ the benchmarks' JSON/markdown/PNGs) to $OUT (or
# ./gpu_out). Budget: about 8 minutes in all (build ~4-5 min on 16 cores, tests, benchmarks).
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
  # Side by side in one run: Tensor Cores (fp16 / bf16 / tf32) vs the scalar fp32 kernel vs
  # gsplat's rasterization when importable, on one scene per benchmark.
  t0=$(date +%s)
  timeout 150 "$PY" benchmarks/channels.py --backend cuda --D 3,32,128,512 \
    --out "$OUT/channels" >"$OUT/channels.log" 2>&1
  ch_rc=$?
  timeout 150 "$PY" benchmarks/fps.py --backend cuda --preset garden --resolution 1237x822 \
    --n 1000000 --precision auto,bf16,tf32,fp32 --D 0,128 --frames 10 --warmup 3 \
    --out "$OUT/fps" >"$OUT/fps.log" 2>&1
  fps_rc=$?
  bench_rc=$(( ch_rc != 0 ? ch_rc : fps_rc ))
  log "benchmarks rc=$bench_rc (channels $ch_rc, fps $fps_rc) in $(( $(date +%s) - t0 )) s"
  tail -30 "$OUT/channels.log" "$OUT/fps.log" | tee -a "$LOG"
fi

"$PY" - "$OUT" "$build_rc" "$test_rc" "$bench_rc" <<'PYEOF'
import json, os, sys
out, build_rc, test_rc, bench_rc = sys.argv[1], *map(int, sys.argv[2:5])
def load(*parts):
    path = os.path.join(out, *parts)
    return json.load(open(path)) if os.path.exists(path) else None
summary = {"build_rc": build_rc, "pytest_rc": test_rc, "bench_rc": bench_rc,
           "channels": load("channels", "channels.json"), "fps": load("fps", "fps.json")}
json.dump(summary, open(os.path.join(out, "gpu_check.json"), "w"), indent=1)
print(json.dumps(summary, indent=1))
PYEOF
[ $build_rc -eq 0 ] && [ $test_rc -eq 0 ] && [ $bench_rc -eq 0 ]
