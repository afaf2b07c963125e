#!/usr/bin/env bash
# A real scene end to end: photos -> COLMAP scene -> trained 3DGS -> Mip-NeRF 360 evaluation.
#
#   scripts/bench_real.sh SCENE_PHOTOS_DIR OUT_DIR [--steps N] [--quick]
#   make bench-real [SCENE=../shared/data/bonsai/images] [BENCH_REAL_OUT=out/bench_real] [STEPS=N] [QUICK=1]
#
# NAME is the photos folder's name, or its parent's when it is called `images`
# (../shared/data/bonsai/images -> bonsai). Four steps, the first two skipped when their output is there
# (delete it to redo):
#   1. gsrender prepare PHOTOS --out OUT/NAME            (SfM with pycolmap; with --from-model
#      data/scenes/NAME/sfm_model when the repository has that model: undistortion only)
#   2. gsrender train --colmap OUT/NAME --preset 3dgs --steps N --out OUT/model/NAME
#      --checkpoint-every 500                            (the held-out photos: every 8th of prepare.json;
#      a run stopped half-way goes on from its newest checkpoint: gsrender train --resume)
#   3. python benchmarks/mipnerf360.py --data OUT --models OUT/model --scenes NAME --out OUT/eval
#   4. python benchmarks/real_scene.py: the record of the three, benchmarks/results/real_NAME.json
#      (real_NAME_STEPS.json for a budget other than 7000; OUT/real_NAME.json for --quick)
# --steps: 7000 by default (3DGS's 7k checkpoint of its 30000-step schedule; --steps 30000 after a
# 7000-step run resumes it to the end). --quick: 300 training steps (a smoke run).
set -euo pipefail

usage() { sed -n '3,4p' "$0" | sed 's/^# *//' >&2; exit 2; }
[ $# -ge 2 ] || usage
PHOTOS=$(realpath -m "$1"); OUT=$(realpath -m "$2"); shift 2
STEPS=7000
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) [ $# -ge 2 ] || usage; STEPS=$2; shift 2 ;;
    --quick) STEPS=300; QUICK=1; shift ;;
    -h|--help) usage ;;
    *) echo "bench_real.sh: unknown option $1" >&2; usage ;;
  esac
done
[ -d "$PHOTOS" ] || { echo "bench_real.sh: no photos folder $PHOTOS" >&2; exit 2; }

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
NAME=$(basename "$PHOTOS")
[ "$NAME" = images ] && NAME=$(basename "$(dirname "$PHOTOS")")
SCENE=$OUT/$NAME
MODEL=$OUT/model/$NAME
step() { echo; echo "== $* ($(date -u +%H:%M:%S) UTC)"; }

step "1/4 prepare $PHOTOS -> $SCENE"
if [ -f "$SCENE/prepare.json" ] && [ -d "$SCENE/sparse/0" ]; then
  echo "$SCENE/prepare.json exists: kept"
else
  FROM=()
  if [ -d "data/scenes/$NAME/sfm_model" ]; then FROM=(--from-model "data/scenes/$NAME/sfm_model"); fi
  "$PY" -m gsrender prepare "$PHOTOS" --out "$SCENE" "${FROM[@]}"
fi

step "2/4 train $SCENE -> $MODEL"
DONE=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['steps'])" "$MODEL/results.json" 2>/dev/null || echo 0)
if [ "$DONE" -ge "$STEPS" ]; then
  echo "$MODEL/results.json has $DONE steps: kept"
elif [ -d "$MODEL/checkpoints" ] && [ -n "$(ls "$MODEL/checkpoints")" ]; then
  "$PY" -m gsrender train --resume "$MODEL" --steps "$STEPS"
else
  "$PY" -m gsrender train --colmap "$SCENE" --preset 3dgs --steps "$STEPS" --out "$MODEL" \
    --checkpoint-every 500 --eval-every 1000 --eval-train-views 32 --snapshot-every 1000 --plot
fi

step "3/4 evaluate -> $OUT/eval"
"$PY" benchmarks/mipnerf360.py --data "$OUT" --models "$OUT/model" --scenes "$NAME" --out "$OUT/eval"

step "4/4 record"
# the 7k record is real_NAME.json; another budget gets its own (real_NAME_30000.json), so a run
# resumed to 30000 steps keeps the 7k figures beside it
RECORD=benchmarks/results/real_$NAME.json
[ "$STEPS" != 7000 ] && RECORD=benchmarks/results/real_${NAME}_$STEPS.json
[ "$QUICK" = 1 ] && RECORD=$OUT/real_$NAME.json
"$PY" benchmarks/real_scene.py --name "$NAME" --scene "$SCENE" --model "$MODEL" --eval "$OUT/eval" --json "$RECORD"
