#!/usr/bin/env bash
# One command for a bare GPU machine with torch preinstalled (no internet), in two phases:
#  1. kernels first, no torch build (target: under 3 minutes): build tools/kernel_driver with
#     nvcc, run every case of the standard set (the real-scale ones included: tile lists of
#     several chunks) through the torch-free launch layer, check the outputs against the CPU
#     backend's (gsrender.testing.check: a skipped case fails), and run a subset under
#     compute-sanitizer memcheck and racecheck. The cases come from $CASES (default
#     build/kernel_cases: generate them beforehand with `python -m gsrender.testing.make_cases
#     build/kernel_cases` and carry the folder); without them a CPU-only extension build makes
#     them here, in parallel with the driver build.
#  2. build gsrender in place for this device, run the CUDA tests (CUDA vs the CPU backend), the
#     channel sweep and the FPS harness on CUDA (Tensor Core precisions vs the scalar kernel vs
#     gsplat when importable).
# Writes gpu_check.json + gpu_check.log (+ kernel_check.log, the result cases, the benchmarks'
# JSON/markdown/PNGs) to $OUT (or ./gpu_out). KERNELS_ONLY=1 stops after phase 1.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
: >"$LOG"
log() { echo "[$(date +%T)] $*" | tee -a "$LOG"; }

# ---- phase 1: the kernels through the driver ------------------------------------------------
CASES=${CASES:-build/kernel_cases}
t0=$(date +%s)
case_pid=""
if [ ! -f "$CASES/.complete" ]; then
  log "no case set at $CASES: CPU-only build + make_cases, in parallel with the driver build"
  ( GSRENDER_NO_CUDA=1 MAX_JOBS=$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 )) \
      "$PY" setup.py -q build_ext --inplace >"$OUT/cpu_build.log" 2>&1 &&
    "$PY" -m gsrender.testing.make_cases "$CASES" --clean >>"$OUT/cpu_build.log" 2>&1 ) &
  case_pid=$!
fi
timeout 300 tools/kernel_driver/build.sh build/kernel_driver >"$OUT/driver_build.log" 2>&1
driver_rc=$?
log "driver build rc=$driver_rc in $(( $(date +%s) - t0 )) s"
tail -3 "$OUT/driver_build.log" | tee -a "$LOG"
[ -n "$case_pid" ] && { wait "$case_pid"; log "cases rc=$? (log: cpu_build.log)"; }
kernel_rc=1
if [ $driver_rc -eq 0 ] && [ -f "$CASES/.complete" ]; then
  t0=$(date +%s)
  rm -rf "$OUT/kernel_results"
  timeout 240 build/kernel_driver/kernel_driver "$CASES" "$OUT/kernel_results" >"$OUT/kernel_run.log" 2>&1
  run_rc=$?
  "$PY" -m gsrender.testing.check "$OUT/kernel_results" --expected "$CASES" >"$OUT/kernel_check.log" 2>&1
  kernel_rc=$?
  log "kernel driver rc=$run_rc, check rc=$kernel_rc in $(( $(date +%s) - t0 )) s"
  grep -v "^PASS" "$OUT/kernel_check.log" | tail -40 | tee -a "$LOG"
  # memory and shared-memory race checks on one case per kernel family
  if command -v compute-sanitizer >/dev/null 2>&1; then
    for tool in memcheck racecheck; do
      for only in rasterize_fwd_small_sorted_D16_f16 rasterize_fwd_small_weighted_D4_tf32 \
                  rasterize_fwd_tiny_sorted_D130_bf16 rasterize_bwd_small_sorted_D16_f16 \
                  rasterize_bwd_small_weighted_D4_bf16 rasterize_bwd_small_sorted_D3_det \
                  rasterize_fwd_small_weighted_D16_f32 bin_tiles_small_t16_sorted \
                  project_bwd_small weight_stats_small_K4 contributors_small_list \
                  rasterize_fwd_crowd_sorted_D64_f16 rasterize_bwd_crowd_weighted_D13_bf16 \
                  rasterize_bwd_crowd_sorted_D1_det bin_tiles_large_t8_sorted_exact; do
        timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 3 \
          build/kernel_driver/kernel_driver "$CASES" "$OUT/sanitizer_results" --only "$only" \
          >"$OUT/sanitizer_${tool}_${only}.log" 2>&1
        rc=$?
        log "compute-sanitizer $tool $only rc=$rc"
        [ $rc -eq 0 ] || { kernel_rc=1; tail -20 "$OUT/sanitizer_${tool}_${only}.log" | tee -a "$LOG"; }
      done
    done
  else
    log "compute-sanitizer not found: sanitizer runs skipped"
  fi
fi
if [ "${KERNELS_ONLY:-0}" = "1" ]; then
  echo "{\"driver_build_rc\": $driver_rc, \"kernel_rc\": $kernel_rc}" >"$OUT/gpu_check.json"
  [ $kernel_rc -eq 0 ]
  exit
fi

# ---- phase 2: the extension, its CUDA tests and the benchmarks ------------------------------
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
grep -E "error|warning" "$OUT/build.log" | sort -u | sed -n 1,40p | tee -a "$LOG"

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

"$PY" - "$OUT" "$build_rc" "$test_rc" "$bench_rc" "$driver_rc" "$kernel_rc" <<'PYEOF'
import json, os, sys
out, build_rc, test_rc, bench_rc, driver_rc, kernel_rc = sys.argv[1], *map(int, sys.argv[2:7])
def load(*parts):
    path = os.path.join(out, *parts)
    return json.load(open(path)) if os.path.exists(path) else None
summary = {"driver_build_rc": driver_rc, "kernel_rc": kernel_rc, "build_rc": build_rc, "pytest_rc": test_rc, "bench_rc": bench_rc,
           "channels": load("channels", "channels.json"), "fps": load("fps", "fps.json")}
json.dump(summary, open(os.path.join(out, "gpu_check.json"), "w"), indent=1)
print(json.dumps(summary, indent=1))
PYEOF
[ $kernel_rc -eq 0 ] && [ $build_rc -eq 0 ] && [ $test_rc -eq 0 ] && [ $bench_rc -eq 0 ]
