#!/usr/bin/env bash
# The patches waiting in lab/pending measured in one call on one GPU (H200 preferred; what each
# predicts is in docs/performance.md, Next):
#   combine-batches.patch the staged combine's units in batches, one barrier a region: the
#                         combine stage, at the EP8 slices (units of ~1.4 rows) and at EP1 (a
#                         real rank's units of 6 rows, where its first form lost 9%)
# Here, before the call:
#   lab/ab.sh prepare HEAD && for p in lab/pending/*.patch; do git apply "$p"; done
# then from the repository root with .deps and build/ab-old carried, $OUT set by the runner and
# GIT_REV=<HEAD>+pending in the environment. Steps (CALL_S, default 560 s, bounds the whole):
#   1. lab/ab.sh at EP1, Flash, fused at 512 and 4096 tokens, with the stages, 2 rounds
#   2. lab/ab.sh on the Flash and Pro EP8 slices, fused, with the stages, 2 rounds alternated
#      (the old side is main's fused with its stages on this GPU: issue 53's baseline)
#   3. check of the new build (every scenario and mode: fused equals ll bit for bit), then the
#      core on the Flash slice's rows (issue 53's ratio against step 2's old side), as time allows
# Each patch lands with its docs/performance.md row where its stage gains and nothing loses, else
# it is dropped with its row; a measured patch leaves the folder either way.
set -u
T0=$SECONDS
: "${OUT:?set OUT to the output folder}"
export GIT_REV=${GIT_REV:-unknown}
for p in lab/pending/*.patch; do # applied: it reverses cleanly
    git apply -R --check "$p" 2>/dev/null || { echo "apply $p first"; exit 2; }
done
[ -f build/ab-old/Makefile ] || { echo "run lab/ab.sh prepare HEAD and carry build/ab-old"; exit 2; }
export LAB_LOGS=/tmp/all-call-$$
mkdir -p "$LAB_LOGS"
source lab/lab.sh
left() { echo $((${CALL_S:-560} - (SECONDS - T0))); }
limit() { local l; l=$(($(left) - 10)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
stages() { # each run's stage lines of an ab folder
    for f in "$1"/*-old-*.txt "$1"/*-new-*.txt; do
        [ -f "$f" ] && echo "== $(basename "$f")" && grep -A8 '^## stages' "$f" | grep '^fused'
    done
}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$LAB_LOGS/gpu.txt"
timeout "$(limit 200)" lab/ab.sh run "$LAB_LOGS/ep1" --configs deepseek-v4-flash --modes fused \
    --batches 512,4096 --rounds 2 --iters 20 --no-check
stages "$LAB_LOGS/ep1" | tee "$LAB_LOGS/ep1-stages.txt"
rm -f "$LAB_LOGS/ep1/ab.tgz"
lab_pack "$OUT"
[ "$(left)" -gt 120 ] && timeout "$(limit 260)" lab/ab.sh run "$LAB_LOGS/slices" --bench-extra "--ep-slice 8" \
    --modes fused --batches 512,4096,8192 --rounds 2 --iters 20 --no-check
stages "$LAB_LOGS/slices" | tee "$LAB_LOGS/slice-stages.txt"
rm -f "$LAB_LOGS/slices/ab.tgz"
lab_pack "$OUT"
[ "$(left)" -gt 80 ] && LAB_TIMEOUT=$(limit 100) lab_run 0 check-fp8 mpirun --bind-to none -np 1 build/megamoe check &&
    grep "^check:" "$LAB_LOGS/check-fp8.log"
lab_pack "$OUT"
[ "$(left)" -gt 50 ] && LAB_TIMEOUT=$(limit 40) lab_run 0 gemm-flash-routing mpirun --bind-to none -np 1 build/ab-old/build/megamoe \
    gemm --config configs/deepseek-v4-flash.json --ep 8 --spread routing --rows 24576,49152 --iters 10 \
    --json "$LAB_LOGS/gemm-flash-routing.json" && grep -E "^gemm[12] " "$LAB_LOGS/gemm-flash-routing.log"
lab_pack "$OUT"
echo "done at $((SECONDS - T0)) s"
