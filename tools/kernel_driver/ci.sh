#!/usr/bin/env bash
# CI for the kernel driver and the case files (no GPU; .ci/run calls it after the extension
# build): builds the driver with nvcc (PTX only: no ptxas, the extension build already compiles
# SASS and checks spills), writes the standard case set from the CPU backend, and checks
#   1. the driver's own case reader / writer (kernel_driver --echo: expected arrays back as
#      outputs through the C++ code) — the checker must pass every case;
#   2. the Python writer / reader the same way (gsrender.testing.echo);
#   3. the tolerance logic can fail: a perturbed echo must fail every case;
#   4. the kernels themselves on the CPU: the SIMT build (build.sh --simt, tools/simt) runs
#      the runtime's self-test and every standard case through the real kernels (the real-scale
#      ones included, split over the cores), and the checker must pass all of them, skips
#      included, with the set's longest tile list past two chunks. Its build stays in
#      build/kernel_driver_simt, where tests/cuda/test_simt_driver.py finds it.
# Usage: tools/kernel_driver/ci.sh [python]   (env KDRIVER_JOBS: parallel compiles and SIMT runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${1:-${PYTHON:-python}}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
t0=$(date +%s)
# the kernels, their launch layer and the shared headers stay torch-free (build.sh has no torch
# include path: a transitive include fails the build; this names the direct ones, the CPU
# kernels' too): torch is csrc/ops/'s alone
if grep -rnE '#include <(ATen|torch|c10)/' csrc/cuda csrc/cpu csrc/include tools/kernel_driver; then
  echo "kernel_driver/ci.sh: torch header outside csrc/ops" >&2
  exit 1
fi
tools/kernel_driver/build.sh "$WORK/build"
t1=$(date +%s)
"$PY" -m gsrender.testing.make_cases "$WORK/cases" >"$WORK/make_cases.log" \
  || { cat "$WORK/make_cases.log"; exit 1; }
t2=$(date +%s)
"$WORK/build/kernel_driver" --echo "$WORK/cases" "$WORK/driver_echo"
# (the checkers' summaries go to logs: CI output keeps pytest's as its only "N passed" line)
"$PY" -m gsrender.testing.check "$WORK/driver_echo" --expected "$WORK/cases" --quiet >"$WORK/driver_echo.log" \
  || { cat "$WORK/driver_echo.log"; exit 1; }
"$PY" -m gsrender.testing.echo "$WORK/cases" "$WORK/py_echo"
"$PY" -m gsrender.testing.check "$WORK/py_echo" --expected "$WORK/cases" --quiet >"$WORK/py_echo.log" \
  || { cat "$WORK/py_echo.log"; exit 1; }
"$PY" -m gsrender.testing.echo "$WORK/cases" "$WORK/perturbed" --perturb
set +e
"$PY" -m gsrender.testing.check "$WORK/perturbed" --expected "$WORK/cases" --quiet >"$WORK/perturbed.log"
rc=$?
set -e
n=$(ls "$WORK/cases" | wc -l)
if [ "$rc" -eq 0 ] || ! tail -1 "$WORK/perturbed.log" | grep -q "^summary: 0 passed, $n failed"; then
  echo "kernel_driver/ci.sh: the perturbed outputs were not all rejected" >&2
  exit 1
fi
t3=$(date +%s)
tools/kernel_driver/build.sh --simt build/kernel_driver_simt >"$WORK/simt_build.log" 2>&1 \
  || { cat "$WORK/simt_build.log"; exit 1; }
build/kernel_driver_simt/simt_selftest semantics >"$WORK/simt_selftest.log" \
  || { cat "$WORK/simt_selftest.log"; exit 1; }
t4=$(date +%s)
# the driver runs one case at a time: one driver per core, each on every JOBS-th case (folders
# of links to the cases), all writing into one result folder
JOBS=${KDRIVER_JOBS:-$(nproc)}
i=0
for c in "$WORK"/cases/*/; do
  mkdir -p "$WORK/shard$((i % JOBS))"
  ln -s "$c" "$WORK/shard$((i % JOBS))/$(basename "$c")"
  i=$((i + 1))
done
pids=()
for ((j = 0; j < JOBS && j < i; ++j)); do
  build/kernel_driver_simt/kernel_driver "$WORK/shard$j" "$WORK/simt" >"$WORK/simt_run$j.log" 2>&1 &
  pids+=($!)
done
for ((j = 0; j < ${#pids[@]}; ++j)); do
  wait "${pids[$j]}" || { cat "$WORK/simt_run$j.log"; exit 1; }
done
"$PY" -m gsrender.testing.check "$WORK/simt" --expected "$WORK/cases" --quiet >"$WORK/simt_check.log" \
  || { cat "$WORK/simt_check.log"; exit 1; }
echo "kernel_driver CI: $n cases through the driver's and Python's case I/O, all $n perturbed ones rejected"
echo "kernel_driver CI: all $n cases pass through the real kernels on the CPU (SIMT runtime); $(grep '^set:' "$WORK/simt_check.log")"
echo "kernel_driver CI: build $((t1 - t0)) s, cases $((t2 - t1)) s ($(du -sm "$WORK/cases" | cut -f1) MB), checks $((t3 - t2)) s, SIMT build $((t4 - t3)) s, SIMT run + check $(( $(date +%s) - t4 )) s ($JOBS drivers)"
# what compute-sanitizer would catch, on the CPU: the race check and ASan + UBSan on a subset
tools/kernel_driver/sanitize_ci.sh "$WORK/cases" "$PY"
