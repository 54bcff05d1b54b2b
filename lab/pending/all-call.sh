#!/usr/bin/env bash
# The patches waiting in lab/pending measured in one call on one GPU (H200 preferred; device time
# is scarce, and their effects show in different places, so one A/B tells them apart; what each
# predicts is in docs/performance.md, Next):
#   quant-chains.patch    the quantizer's block tails interleaved: the dispatch stage
#   fp4-decode-two.patch  the FP4 core's decode form, two CTAs an SM: `gemm --weights fp4` at
#                         1-32 rows an expert (no FP8 path changes)
#   combine-batches.patch the staged combine's units in batches, one barrier a region: the
#                         combine stage
# Here, before the call:
#   lab/ab.sh prepare HEAD && for p in lab/pending/*.patch; do git apply "$p"; done
# then from the repository root with .deps and build/ab-old carried, $OUT set by the runner and
# GIT_REV=<HEAD>+pending in the environment. Steps (CALL_S, default 560 s, bounds the whole):
#   1. lab/ab.sh on the Flash and Pro EP8 slices, fused, with the stages, 2 rounds alternated
#      (the old side is main's fused with its stages on this GPU: issue 53's baseline)
#   2. lab/ab.sh on `gemm --weights fp4` at 1-32 rows an expert (the builds of step 1 reused)
#   3. check of the new build (every scenario and mode: fused equals ll bit for bit), then
#      check --weights fp4, then fp4_warps_probe, then the core on the Flash slice's rows (issue
#      53's ratio against step 1's old side), as time allows
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
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$LAB_LOGS/gpu.txt"
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/fp4_warps_probe \
    lab/probes/fp4_warps_probe.cu >"$LAB_LOGS/probe-build.log" 2>&1 &
timeout "$(limit 380)" lab/ab.sh run "$LAB_LOGS/slices" --bench-extra "--ep-slice 8" --modes fused \
    --batches 1,512,4096,8192 --rounds 2 --iters 20 --no-check
cat "$LAB_LOGS/slices/summary.txt"
rm -f "$LAB_LOGS/slices/ab.tgz"
lab_pack "$OUT"
[ "$(left)" -gt 90 ] && timeout "$(limit 120)" lab/ab.sh run "$LAB_LOGS/fp4" --gemm 32,256,512,1024 \
    --gemm-extra "--weights fp4" --rounds 2 --iters 15 --no-check && cat "$LAB_LOGS/fp4/summary.txt"
rm -f "$LAB_LOGS/fp4/ab.tgz"
wait
lab_pack "$OUT"
for w in fp8 fp4; do
    [ "$(left)" -gt 100 ] || { echo "check --weights $w: skipped, $(left) s left"; continue; }
    LAB_TIMEOUT=$(limit 120) lab_run 0 check-$w mpirun --bind-to none -np 1 build/megamoe check --weights $w
    grep "^check:" "$LAB_LOGS/check-$w.log"
    lab_pack "$OUT"
done
[ "$(left)" -gt 70 ] && [ -x build/fp4_warps_probe ] && LAB_TIMEOUT=$(limit 90) lab_run 0 probe build/fp4_warps_probe &&
    cat "$LAB_LOGS/probe.log"
lab_pack "$OUT"
# issue 53's ratio on this GPU: the core alone on the Flash slice's rows (the old side of step 1
# is main's fused with its stages on the same GPU)
[ "$(left)" -gt 50 ] && LAB_TIMEOUT=$(limit 40) lab_run 0 gemm-flash-routing mpirun --bind-to none -np 1 build/ab-old/build/megamoe \
    gemm --config configs/deepseek-v4-flash.json --ep 8 --spread routing --rows 24576,49152 --iters 10 \
    --json "$LAB_LOGS/gemm-flash-routing.json" && grep -E "^gemm[12] " "$LAB_LOGS/gemm-flash-routing.log"
lab_pack "$OUT"
echo "done at $((SECONDS - T0)) s"
