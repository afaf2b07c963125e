#!/usr/bin/env bash
# Rebuilds the CUDA objects with ptxas verbose output and prints registers / spills / shared
# memory per gsrender kernel (cub's kernels are left out). Exits 1 when a rasterize kernel spills.
# Usage: tools/check_cuda.sh [python]   (env: TORCH_CUDA_ARCH_LIST, default "8.0;9.0"; MAX_JOBS)
#        tools/check_cuda.sh --log FILE [python]   reads the log of a build that already ran with
#        GSRENDER_PTXAS_VERBOSE=1 (as .ci/run's) instead of rebuilding
set -euo pipefail
cd "$(dirname "$0")/.."
GIVEN_LOG=""
if [ "${1:-}" = "--log" ]; then
  GIVEN_LOG=$2
  shift 2
fi
PY=${1:-${PYTHON:-python}}
if [ -n "$GIVEN_LOG" ]; then
  LOG=$GIVEN_LOG
else
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-"8.0;9.0"}
  export GSRENDER_PTXAS_VERBOSE=1 FORCE_CUDA=1  # no GPU needed to compile them
  LOG=$(mktemp)
  trap 'rm -f "$LOG"' EXIT
  # ptxas only reports when it runs: drop the CUDA objects so ninja recompiles them
  find build \( -path '*csrc/cuda/*.o' -o -path '*csrc/ops/cuda/*.o' \) -delete 2>/dev/null || true
  "$PY" setup.py build_ext --inplace >"$LOG" 2>&1 || { tail -50 "$LOG"; echo "build failed"; exit 2; }
fi
if grep -qi "warning" "$LOG"; then
  echo "== compiler warnings =="
  grep -i "warning" "$LOG" | sort -u | sed -n 1,40p  # (sed reads all: no SIGPIPE under pipefail)
fi
"$PY" - "$LOG" <<'PYEOF'
import re, shutil, subprocess, sys
text = open(sys.argv[1], errors="replace").read().splitlines()
rows, fn, arch, spill = [], None, None, (0, 0)
for line in text:
    m = re.search(r"Compiling entry function '([^']+)' for '(sm_\w+)'", line)
    if m:
        fn, arch, spill = m.group(1), m.group(2), (0, 0)
        continue
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m:
        spill = (int(m.group(1)), int(m.group(2)))
        continue
    m = re.search(r"Used (\d+) registers", line)
    if m and fn and "gsrender" in fn:
        smem = re.search(r"(\d+) bytes smem", line)
        rows.append((arch, fn, int(m.group(1)), spill, int(smem.group(1)) if smem else 0))
        fn = None
if not rows:
    print("no ptxas output found (was the CUDA build skipped?)")
    sys.exit(2)
names = [r[1] for r in rows]
if shutil.which("c++filt"):
    names = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                           text=True).stdout.splitlines()
bad = False
print("== ptxas: arch | kernel | registers | spill stores/loads (bytes) | shared memory (bytes)")
for (arch, _, regs, (st, ld), smem), name in sorted(zip(rows, names), key=lambda r: (r[1], r[0][0])):
    name = name.replace("gsrender::gpu::(anonymous namespace)::", "")
    name = re.sub(r"\(gsrender::gpu::RasterParams.*", "", name)
    print(f"{arch:6s} {name[:70]:70s} regs={regs:<4d} spills={st}/{ld} smem={smem}")
    bad |= "raster" in name and (st or ld) > 0
if bad:
    print("FAIL: a rasterize kernel spills registers")
    sys.exit(1)
print("OK: no register spills in the rasterize kernels")
PYEOF
