#!/usr/bin/env bash
# The patches waiting in lab/pending measured in one call on one GPU (what each predicts is in
# docs/performance.md, Next):
#   fp4-four.patch  the FP4 core's four-warpgroup decode form (gemm.cu grouped_gemm_fp4_four_kernel)
# Here, before the call:
#   lab/ab.sh prepare HEAD && for p in lab/pending/*.patch; do git apply "$p"; done
# Steps (CALL_S, default 540 s, bounds the whole), new = the tree with the patches, old = main:
#   1. lab/ab.sh --gemm: `gemm --weights fp4` at 1 / 8 / 16 / 32 rows an expert (Flash), Pro alike
#   2. check --weights fp4 of the new build (every scenario with FP4 experts)
#   3. lab/ab.sh: ll and normal with FP4 experts on the Flash and Pro EP8 slices, 1 / 64 / 160 tokens
#   4. memcheck of the form's scenarios (ll, normal)
#   5. on an H200, as time allows: main's fused on the EP8 slices at 4096 / 8192 tokens with its
#      stages, and the core on the same rows (issue 53's H200 baseline)
#   6. as time allows: Nsight Compute of the four-warpgroup form at 16 rows an expert
# From the repository root with .deps and build/ab-old carried, $OUT set, GIT_REV=<HEAD>+pending.
set -u
T0=$SECONDS
: "${OUT:?set OUT}"
for p in lab/pending/*.patch; do # applied: it reverses cleanly
    git apply -R --check "$p" 2>/dev/null || { echo "apply $p first"; exit 2; }
done
[ -f build/ab-old/Makefile ] || { echo "run lab/ab.sh prepare HEAD and carry build/ab-old"; exit 2; }
export GIT_REV=${GIT_REV:-unknown}
export LAB_LOGS=/tmp/all-call-$$
mkdir -p "$LAB_LOGS"
source lab/lab.sh
left() { echo $((${CALL_S:-540} - (SECONDS - T0))); }
limit() { local l; l=$(($(left) - 10)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee "$LAB_LOGS/gpu.txt"
timeout "$(limit 220)" lab/ab.sh run "$LAB_LOGS/gemm" --gemm 32,256,512,1024 --gemm-extra "--weights fp4" \
    --rounds 2 --iters 15 --no-check
rm -f "$LAB_LOGS/gemm/ab.tgz"; lab_pack "$OUT"
[ "$(left)" -gt 90 ] && LAB_TIMEOUT=$(limit 110) lab_run 0 check-fp4 mpirun --bind-to none -np 1 build/megamoe check --weights fp4 &&
    grep "^check:" "$LAB_LOGS/check-fp4.log"
[ -f "$LAB_LOGS/check-fp4.log" ] && grep -E "FAIL" "$LAB_LOGS/check-fp4.log" | head -5
lab_pack "$OUT"
[ "$(left)" -gt 100 ] && timeout "$(limit 140)" lab/ab.sh run "$LAB_LOGS/modes" --bench-extra "--ep-slice 8 --weights fp4" \
    --modes ll,normal --batches 1,64,160 --rounds 2 --iters 20 --no-check
rm -f "$LAB_LOGS/modes/ab.tgz"; lab_pack "$OUT"
if [ "$(left)" -gt 60 ] && command -v compute-sanitizer >/dev/null; then
    for f in fp4-four fp4-swapped-hot; do
        LAB_TIMEOUT=$(limit 60) lab_run 0 memcheck-$f mpirun --bind-to none -np 1 compute-sanitizer --tool memcheck \
            --error-exitcode 9 build/megamoe check --weights fp4 --filter $f --modes ll,normal &&
            grep -E "^check:|ERROR SUMMARY" "$LAB_LOGS/memcheck-$f.log"
    done
fi
lab_pack "$OUT"
if grep -q H200 "$LAB_LOGS/gpu.txt" && [ "$(left)" -gt 60 ]; then
    for c in flash pro; do
        [ "$(left)" -gt 40 ] && LAB_TIMEOUT=$(limit 90) lab_run 0 h200-slice-$c mpirun --bind-to none -np 1 build/ab-old/build/megamoe \
            bench --config configs/deepseek-v4-$c.json --ep-slice 8 --modes fused --batches 4096,8192 --breakdown \
            --json "$LAB_LOGS/h200-slice-$c.json"
        [ "$(left)" -gt 25 ] && LAB_TIMEOUT=$(limit 40) lab_run 0 h200-gemm-$c mpirun --bind-to none -np 1 build/ab-old/build/megamoe \
            gemm --config configs/deepseek-v4-$c.json --ep 8 --spread routing --rows 24576,49152 --iters 10 \
            --json "$LAB_LOGS/h200-gemm-$c.json"
        lab_pack "$OUT"
    done
fi
# 6. (Flash GEMM1, 512 rows: 16 an expert)
[ "$(left)" -gt 70 ] && LAB_TIMEOUT=$(limit 60) lab_ncu ncu-four16 grouped_gemm_fp4_four all mpirun --bind-to none -np 1 \
    build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 512 --weights fp4 --warmup 0 --iters 1
lab_pack "$OUT"
echo "done at $((SECONDS - T0)) s"
