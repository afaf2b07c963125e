#!/usr/bin/env bash
# What compute-sanitizer would check on a GPU, on the CPU (docs/cuda.md "Sanitizers on the CPU"):
# builds the SIMT driver twice, with the race check (build.sh --simt --racecheck: shared / global
# hazards between threads of a block, missing __syncthreads / __syncwarp) and under
# AddressSanitizer + UBSan (build.sh --simt --asan: out-of-bounds, misaligned, overflow), runs a
# subset of the standard cases (every kernel family, every Tensor Core precision, both modes)
# through each, and fails on any report or any case the checker rejects.
# Usage: tools/kernel_driver/sanitize_ci.sh CASES_DIR [python]
#   CASES_DIR: the standard set (python -m gsrender.testing.make_cases CASES_DIR)
#   env: SANITIZE_BUILD (default build/): where build/kernel_driver_{race,asan} go
set -euo pipefail
cd "$(dirname "$0")/../.."
CASES=${1:?usage: sanitize_ci.sh CASES_DIR [python]}
PY=${2:-${PYTHON:-python}}
BUILD=${SANITIZE_BUILD:-build}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# one case of each kernel, precision path and mode, two with lists of several chunks (crowd)
SUBSET="project_fwd_tiny_aa project_bwd_tiny_aa sh_fwd_tiny_deg3 sh_bwd_tiny_deg3
  bin_tiles_tiny_t16_sorted_exact bin_tiles_small_t8_unsorted_exact
  rasterize_fwd_tiny_sorted_D3_f32 rasterize_fwd_tiny64_weighted_D40_f64
  rasterize_fwd_tiny_sorted_D4_f16 rasterize_fwd_tiny_weighted_D130_bf16
  rasterize_fwd_tiny_sorted_D40_tf32 rasterize_fwd_tiny_weighted_D16_f16
  rasterize_bwd_tiny_sorted_D3_f32 rasterize_bwd_tiny_weighted_D40_det
  rasterize_bwd_tiny_sorted_D16_f16 rasterize_bwd_tiny_weighted_D130_bf16
  rasterize_fwd_crowd_sorted_D13_f16 rasterize_bwd_crowd_sorted_D13_bf16
  weight_stats_tiny_K4 contributors_tiny_list"
t0=$(date +%s)
tools/kernel_driver/build.sh --simt --racecheck "$BUILD/kernel_driver_race" >"$WORK/race_build.log" 2>&1 \
  || { cat "$WORK/race_build.log"; exit 1; }
t1=$(date +%s)
tools/kernel_driver/build.sh --simt --asan "$BUILD/kernel_driver_asan" >"$WORK/asan_build.log" 2>&1 \
  || { cat "$WORK/asan_build.log"; exit 1; }
t2=$(date +%s)
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
n=0
for c in $SUBSET; do
  [ -d "$CASES/$c" ] || { echo "sanitize_ci.sh: case $c not in $CASES" >&2; exit 1; }
  n=$((n + 1))
  for kind in race asan; do
    "$BUILD/kernel_driver_$kind/kernel_driver" "$CASES" "$WORK/$kind" --only "$c" \
      >>"$WORK/${kind}_run.log" 2>&1 || { cat "$WORK/${kind}_run.log"; exit 1; }
  done
done
t3=$(date +%s)
for kind in race asan; do
  "$PY" -m gsrender.testing.check "$WORK/$kind" --quiet >"$WORK/${kind}_check.log" \
    || { cat "$WORK/${kind}_check.log"; exit 1; }
done
echo "sanitize CI: $n cases clean under the SIMT race check and ASan + UBSan, and pass the checker"
echo "sanitize CI: race build $((t1 - t0)) s, ASan build $((t2 - t1)) s, runs $((t3 - t2)) s, checks $(( $(date +%s) - t3 )) s"
