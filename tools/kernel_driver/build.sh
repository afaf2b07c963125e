#!/usr/bin/env bash
# Builds tools/kernel_driver/kernel_driver with nvcc alone (no torch, no CMake): the driver plus
# the kernel translation units csrc/cuda/*_kernel.cu, each compiled with the extension's nvcc
# flags (so the kernels are the ones the extension runs), the CUDA runtime linked dynamically
# (-cudart shared) and PTX for compute_80 and compute_90 embedded, so any CUDA runtime and driver
# new enough for this toolkit, or a PTX-level simulator, JIT-compiles and runs it.
# Usage: tools/kernel_driver/build.sh [BUILD_DIR]   (default build/kernel_driver)
#        tools/kernel_driver/build.sh --simt [BUILD_DIR]   (default build/kernel_driver_simt)
#   --simt: the same sources compiled by the host C++ compiler against tools/simt (the CUDA
#   stand-in that runs the kernels on the CPU, docs/cuda.md); no nvcc, no CUDA headers.
#   Also builds BUILD_DIR/simt_selftest (the runtime's own checks, tools/simt/selftest.cu).
#   env: CXX (default g++), KDRIVER_SIMT_FLAGS (extra compiler flags)
#        tools/kernel_driver/build.sh --simt --racecheck [BUILD_DIR]   (default build/kernel_driver_race)
#   --racecheck: shared / global memory hazards between threads of a block (tools/simt/racecheck.h):
#   the kernel units under g++'s -fsanitize=thread instrumentation, tools/simt/racecheck.cpp as
#   its runtime; a hazard aborts the launch naming both source lines (addr2line, -g1 line tables).
#        tools/kernel_driver/build.sh --simt --asan [BUILD_DIR]   (default build/kernel_driver_asan)
#   --asan: everything under AddressSanitizer + UBSan (out-of-bounds, misaligned, overflow ...),
#   every report fatal.
# env: NVCC (default: nvcc on PATH, else /usr/local/cuda*/bin/nvcc)
#      KDRIVER_SASS="80 90"  also embed SASS for these archs (ptxas runs: slower build, no JIT)
#      KDRIVER_JOBS          parallel compiles (default: nproc)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = "--simt" ]; then
  shift
  MODE=plain
  case "${1:-}" in --racecheck) MODE=race; shift ;; --asan) MODE=asan; shift ;; esac
  case $MODE in
    plain) OUT=${1:-$ROOT/build/kernel_driver_simt} ;;
    race) OUT=${1:-$ROOT/build/kernel_driver_race} ;;
    asan) OUT=${1:-$ROOT/build/kernel_driver_asan} ;;
  esac
  mkdir -p "$OUT"
  CXX=${CXX:-g++}
  command -v "$CXX" >/dev/null || { echo "build.sh: $CXX not found (set CXX)" >&2; exit 2; }
  # -ffp-contract=off: no FMA contraction on hosts / -march flags that have FMA (IEEE like the CPU
  # backend; nvcc's contraction is one of the last-bit differences the checker allows for)
  FLAGS="-O2 -std=c++20 -DGSR_SIMT -ffp-contract=off -Wno-unknown-pragmas -I$ROOT/tools/simt -I$ROOT/csrc/include -include $ROOT/tools/simt/prelude.h ${KDRIVER_SIMT_FLAGS:-}"
  KFLAGS="" LDFLAGS="" EXTRA=""  # kernel units only / the link / more runtime sources
  case $MODE in
    race)
      FLAGS="$FLAGS -DGSR_SIMT_RACECHECK=1 -g1"
      KFLAGS="-fsanitize=thread --param=tsan-instrument-func-entry-exit=0"
      LDFLAGS="-no-pie"  # absolute addresses for addr2line
      EXTRA="$ROOT/tools/simt/racecheck.cpp" ;;
    asan)
      # -O1: half of -O2's compile time under the sanitizers
      FLAGS="$FLAGS -O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
      LDFLAGS="-fsanitize=address,undefined" ;;
  esac
  JOBS=${KDRIVER_JOBS:-$(nproc)}
  export CXX FLAGS KFLAGS OUT
  t0=$(date +%s)
  mkdir -p "$OUT/obj" "$OUT/kernels"
  rm -f "$OUT"/obj/*.o "$OUT"/kernels/*.o
  { ls "$ROOT"/csrc/cuda/*_kernel.cu | sed "s|\$| kernels|"
    printf '%s obj\n' "$ROOT/tools/kernel_driver/driver.cu" "$ROOT/tools/simt/simt.cpp" \
      "$ROOT/tools/simt/selftest.cu" $EXTRA; } |
    xargs -P "$JOBS" -L1 sh -c 'k=""; [ "$1" = kernels ] && k=$KFLAGS
      $CXX $FLAGS $k -x c++ -c "$0" -o "$OUT/$1/$(basename "$0").o" || exit 255'
  RT="$OUT/obj/simt.cpp.o"
  [ -n "$EXTRA" ] && RT="$RT $OUT/obj/$(basename "$EXTRA").o"
  "$CXX" $LDFLAGS "$OUT"/kernels/*.o "$OUT/obj/driver.cu.o" $RT -o "$OUT/kernel_driver"
  "$CXX" $LDFLAGS "$OUT/obj/selftest.cu.o" $RT -o "$OUT/simt_selftest"
  echo "built $OUT/kernel_driver (SIMT, CPU, $MODE) in $(( $(date +%s) - t0 )) s ($CXX)"
  exit 0
fi
OUT=${1:-$ROOT/build/kernel_driver}
mkdir -p "$OUT"
NVCC=${NVCC:-$(command -v nvcc || ls -d /usr/local/cuda*/bin/nvcc 2>/dev/null | sort -r | sed -n 1p)}
[ -x "$NVCC" ] || { echo "build.sh: nvcc not found (set NVCC)" >&2; exit 2; }
GENCODE="-gencode arch=compute_80,code=compute_80 -gencode arch=compute_90,code=compute_90"
for sm in ${KDRIVER_SASS:-}; do GENCODE="$GENCODE -gencode arch=compute_$sm,code=sm_$sm"; done
# the extension's nvcc flags (setup.py), no torch include path
# -no-compress: plain PTX in the fatbinary, for tools and simulators that read it
FLAGS="-O3 -std=c++20 --use_fast_math -lineinfo --expt-relaxed-constexpr -no-compress -I$ROOT/csrc/include"
JOBS=${KDRIVER_JOBS:-$(nproc)}
export NVCC FLAGS GENCODE OUT
t0=$(date +%s)
ls "$ROOT"/csrc/cuda/*_kernel.cu "$ROOT"/tools/kernel_driver/driver.cu |
  xargs -P "$JOBS" -I{} sh -c 'o="$OUT/$(basename {} .cu).o"; $NVCC $FLAGS $GENCODE -c {} -o "$o" || exit 255'
"$NVCC" -cudart shared $GENCODE "$OUT"/*.o -o "$OUT/kernel_driver"
echo "built $OUT/kernel_driver in $(( $(date +%s) - t0 )) s ($NVCC; $GENCODE)"
