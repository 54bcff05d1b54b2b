#!/usr/bin/env bash
# One device call for lab/pending/fp4-swap-products.patch (the swapped form's promotion factors
# made once a warp; docs/performance.md, Next). Here, first: `lab/ab.sh prepare main`, then on a
# branch `git apply lab/pending/fp4-swap-products.patch`, and carry .deps and build/ab-old; the
# run: `bash lab/pending/fp4-swap-products.sh`. On the machine: the patched tree against main (the
# FP4 core and fused's narrow swapped form, alternated twice), check --weights fp4 of the patched
# tree, memcheck of the core's swapped tiles, fp4_tall_probe, and fused's narrow swapped limit
# at 30-64 rows an expert (lab/ablations/fp4-swap-rows.txt); on an H200 also where main stands on issue 53 (the Flash EP8
# slice and the core on its rows). Once measured, the patch lands or is dropped, and this pair of
# files goes.
set -u
cd "$(dirname "$0")/../.."
source lab/lab.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
L=$LAB_LOGS
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv >"$L/gpu.txt" 2>&1; cat "$L/gpu.txt"
(cd build/ab-old && make -j8 "${lab_cjson[@]}" GIT_REV="$(cat REV)" >"$L/build-old.log" 2>&1) &
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/fp4_tall_probe lab/probes/fp4_tall_probe.cu >"$L/build-probe.log" 2>&1 &
GIT_REV=${GIT_REV:-new} lab_build "$L" || { lab_pack "$OUT"; exit 3; }
wait
[ -x build/ab-old/build/megamoe ] || { echo "old did not build"; tail "$L/build-old.log"; lab_pack "$OUT"; exit 3; }
echo "built at $((SECONDS - t0)) s"
M="mpirun --bind-to none -np 1"
binof() { case $1 in old) echo build/ab-old/build/megamoe ;; *) echo build/megamoe ;; esac; }
G="gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,64,512,4096,12288 --iters 20 --weights fp4"
B="bench --config configs/deepseek-v4-flash.json --modes fused --iters 20 --ep-slice 8 --weights fp4 --batches 1,8,64,160"
for r in 1 2; do
    order="old new"; [ $r = 2 ] && order="new old"
    for v in $order; do
        lab_run 0 g4-$v-$r $M $(binof $v) $G; lab_show g4-$v-$r $v fp4
        lab_run 0 b4-$v-$r $M $(binof $v) $B; grep -hE "^ +[0-9]+ +(OK|FAIL)" "$L/b4-$v-$r.log" | sed "s/^/$v$r /"
    done
    lab_pack "$OUT"
done
echo "at $((SECONDS - t0)) s"
LAB_TIMEOUT=200 lab_run 0 check-fp4 $M build/megamoe check --weights fp4; grep -h "^check:" "$L/check-fp4.log" | tail -1
lab_pack "$OUT"
# memcheck of the core's swapped tiles (N = 8-128) and of ll and normal on FP4's large tiles
LAB_TIMEOUT=120 lab_run 0 memcheck-gemm-fp4 $M compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no \
    build/megamoe gemm --config configs/tiny.json --weights fp4 --ep 2 --rows 1,37,300 --spread skewed --iters 1 --warmup 0
LAB_TIMEOUT=200 lab_run 0 memcheck-fp4tiles $M compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no \
    build/megamoe check --filter fp4-large-tiles --modes normal,ll --timeout-ms 60000
grep -h "ERROR SUMMARY" "$L"/memcheck-*.log
[ -x build/fp4_tall_probe ] && LAB_TIMEOUT=120 lab_run 0 tall-probe build/fp4_tall_probe 20000 && cat "$L/tall-probe.log"
lab_pack "$OUT"
echo "at $((SECONDS - t0)) s"
LAB_TIMEOUT=300 lab_run 0 swap-limit lab/ablate.sh --rounds 2 lab/ablations/fp4-swap-rows.txt "$L/ablate" \
    --config configs/deepseek-v4-flash.json --modes fused --iters 20 --ep-slice 8 --weights fp4 --batches 160,208,256,296,341
tail -40 "$L/swap-limit.log"
if grep -q H200 "$L/gpu.txt"; then # issue 53's H200 baseline: main on the Flash EP8 slice, the core on its rows
    lab_run 0 h200-slice-main $M build/ab-old/build/megamoe bench --config configs/deepseek-v4-flash.json --modes fused \
        --batches 64,512,4096,8192 --iters 20 --breakdown --ep-slice 8 --json "$L/h200-slice-main.json"
    lab_run 0 h200-core-main $M build/ab-old/build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 \
        --spread routing --rows 24576,49152 --iters 10 --json "$L/h200-core-main.json"
    grep -hE "^ +[0-9]+ +OK|^gemm[12] |^fused " "$L"/h200-*.log
fi
lab_ok_rows
lab_pack "$OUT"
echo "all done at $((SECONDS - t0)) s"
