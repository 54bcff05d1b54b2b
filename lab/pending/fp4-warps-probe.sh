#!/usr/bin/env bash
# One call on one GPU (H200 preferred), from the repository root with .deps carried, $OUT set by
# the runner, GIT_REV=<main's short hash> in the environment (the device copy's git HEAD is
# stale). Steps, each time-limited, logs packed into $OUT/logs.tgz after each (few files come
# back one by one):
#   1. lab/probes/fp4_warps_probe.cu: the FP4 swapped form's math with 2 math warpgroups (today),
#      4 as two pairs with a ring each, 4 on one ring (a swapped dual item), N = 8, 16, 32.
#      Build the four-warpgroup decode form (docs/performance.md, Next) only if w4 or w4s
#      streams clearly faster than w2; either way the probe's header and performance.md get
#      the figures, and this script goes.
#   2. issue 53's baseline on this GPU: fused on the Flash EP8 slice at 1024-8192 tokens with
#      its stages, the core on the slice's rows (`gemm --spread routing`), Pro likewise.
#   3. issue 54: the FP4 stream in `gemm` at 1-16 rows an expert.
# Needs about 4 minutes on an H100 (most of it the two builds, in parallel).
set -u
T0=$SECONDS
: "${OUT:?set OUT to the output folder}"
export GIT_REV=${GIT_REV:-unknown}
export LAB_LOGS=/tmp/fp4-warps-$$
mkdir -p "$LAB_LOGS"
source lab/lab.sh
left() { echo $((${CALL_S:-560} - (SECONDS - T0))); }
limit() { local l; l=$(($(left) - 10)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; } # min(cap, time left)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >"$LAB_LOGS/gpu.txt" 2>&1
cat "$LAB_LOGS/gpu.txt"
(make -j16 "${lab_cjson[@]}" GIT_REV="$GIT_REV" build/megamoe >"$LAB_LOGS/build.log" 2>&1; echo "megamoe build rc=$?") &
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/fp4_warps_probe \
    lab/probes/fp4_warps_probe.cu >"$LAB_LOGS/probe-build.log" 2>&1 || tail "$LAB_LOGS/probe-build.log"
LAB_TIMEOUT=$(limit 90) lab_run 0 probe build/fp4_warps_probe
cat "$LAB_LOGS/probe.log"
wait
lab_pack "$OUT"
M=(mpirun --bind-to none -np 1 build/megamoe)
run_if() { # seconds wanted, name, megamoe arguments...
    local want=$1 name=$2; shift 2
    [ "$(left)" -gt $((want + 10)) ] || { echo "$name: skipped, $(left) s left"; return; }
    LAB_TIMEOUT=$(limit "$want") lab_run 0 "$name" "${M[@]}" "$@" --json "$LAB_LOGS/$name.json"
    grep -E "^(gemm[12] |fused )|stage" "$LAB_LOGS/$name.log" | head -20
    lab_pack "$OUT"
}
run_if 60 slice-flash bench --config configs/deepseek-v4-flash.json --ep-slice 8 --modes fused --batches 1024,2048,4096,8192 --breakdown
run_if 40 gemm-flash-routing gemm --config configs/deepseek-v4-flash.json --ep 8 --spread routing --rows 24576,49152 --iters 10
run_if 40 gemm-fp4-stream gemm --config configs/deepseek-v4-flash.json --weights fp4 --ep 8 --rows 1,8,16 --iters 20
run_if 120 slice-pro bench --config configs/deepseek-v4-pro.json --ep-slice 8 --modes fused --batches 4096,8192 --breakdown
run_if 60 gemm-pro-routing gemm --config configs/deepseek-v4-pro.json --ep 8 --spread routing --rows 24576,49152 --iters 10
echo "done at $((SECONDS - T0)) s"
