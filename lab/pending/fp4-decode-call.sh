#!/usr/bin/env bash
# One call on one GPU (H200 preferred) for fp4-decode-two.patch (the FP4 core's decode form: two
# CTAs an SM where no expert has more than 32 rows, so four math warps a scheduler; ptxas: 80
# registers at launch, 48 / 96 split, no spills, wgmma asynchronous). Here, before the call:
#   lab/ab.sh prepare HEAD && git apply lab/pending/fp4-decode-two.patch
# then run this from the repository root with .deps and build/ab-old carried, $OUT set by the
# runner and GIT_REV=<HEAD>+decode in the environment (the device copy's git HEAD is stale).
# Steps, each time-limited (CALL_S, default 480 s, bounds the whole), logs packed into
# $OUT/logs.tgz after each:
#   1. the patch against HEAD: `gemm --weights fp4` at 1-32 rows an expert, Flash and Pro, 2
#      rounds alternated (lab/ab.sh, which builds both sides; AB_CONFIGS, AB_ROUNDS narrow it).
#      Predicted: the FP4 stream at 8-32 rows an expert from ~2.2 TB/s toward the copy rate
#      (H100: ~3.2 TB/s), GEMM1 at 256-1024 rows ~1.3x faster; 1 row an expert about even
#   2. check --weights fp4 of the new build (ll and normal take the decode form in every
#      scenario of <= 32 tokens a rank at EP1; fused equals ll bit for bit)
#   3. fp4_warps_probe (built beside step 1): the same question on an HBM stream, with four math
#      warpgroups on one ring (the form fused would need) beside two rings
#   4. issue 53's baseline on this GPU: fused on the Flash EP8 slice at 1024-8192 tokens with its
#      stages and the core on the slice's rows, then Pro
# Kept: the patch lands (with a docs/performance.md row) if step 1 gains and step 2 passes, else
# it is dropped with its row; this script and the patch go either way.
set -u
T0=$SECONDS
: "${OUT:?set OUT to the output folder}"
export GIT_REV=${GIT_REV:-unknown}
export LAB_LOGS=/tmp/decode-call-$$
mkdir -p "$LAB_LOGS"
source lab/lab.sh
left() { echo $((${CALL_S:-480} - (SECONDS - T0))); }
limit() { local l; l=$(($(left) - 10)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
grep -q grouped_gemm_fp4_decode_kernel kernels/gemm.cu || { echo "apply lab/pending/fp4-decode-two.patch first"; exit 2; }
[ -f build/ab-old/Makefile ] || { echo "run lab/ab.sh prepare HEAD and carry build/ab-old"; exit 2; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >"$LAB_LOGS/gpu.txt" 2>&1
cat "$LAB_LOGS/gpu.txt"
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/fp4_warps_probe \
    lab/probes/fp4_warps_probe.cu >"$LAB_LOGS/probe-build.log" 2>&1 &
timeout "$(limit 330)" lab/ab.sh run "$LAB_LOGS/ab" --gemm 32,256,512,1024 --gemm-extra "--weights fp4" \
    --configs ${AB_CONFIGS:-deepseek-v4-flash,deepseek-v4-pro} --rounds ${AB_ROUNDS:-2} --iters 15 --no-check
cat "$LAB_LOGS/ab/summary.txt"
rm -f "$LAB_LOGS/ab/ab.tgz"
wait
lab_pack "$OUT"
M=(mpirun --bind-to none -np 1 build/megamoe)
run_if() { # seconds wanted, name, megamoe arguments...
    local want=$1 name=$2; shift 2
    [ "$(left)" -gt $((want + 10)) ] || { echo "$name: skipped, $(left) s left"; return; }
    LAB_TIMEOUT=$(limit "$want") lab_run 0 "$name" "${M[@]}" "$@" --json "$LAB_LOGS/$name.json"
    grep -E "^(gemm[12] |fused )|stage|^check:" "$LAB_LOGS/$name.log" | head -20
    lab_pack "$OUT"
}
run_if ${CHECK_S:-120} check-fp4 check --weights fp4
[ "$(left)" -gt 70 ] && [ -x build/fp4_warps_probe ] && LAB_TIMEOUT=$(limit 90) lab_run 0 probe build/fp4_warps_probe && cat "$LAB_LOGS/probe.log"
lab_pack "$OUT"
run_if 60 slice-flash bench --config configs/deepseek-v4-flash.json --ep-slice 8 --modes fused --batches 1024,2048,4096,8192 --breakdown
run_if 40 gemm-flash-routing gemm --config configs/deepseek-v4-flash.json --ep 8 --spread routing --rows 24576,49152 --iters 10
run_if 120 slice-pro bench --config configs/deepseek-v4-pro.json --ep-slice 8 --modes fused --batches 4096,8192 --breakdown
run_if 60 gemm-pro-routing gemm --config configs/deepseek-v4-pro.json --ep 8 --spread routing --rows 24576,49152 --iters 10
echo "done at $((SECONDS - T0)) s"
