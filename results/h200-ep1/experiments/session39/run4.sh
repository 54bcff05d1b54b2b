#!/bin/bash
# Call 4 of the thirty-ninth session. Call 3 found the skeleton (-DMM_WIDE_ABLATE=5, solo) of the
# template kernel at 0.966-0.987 TFLOP/s a MHz on long-k GEMM1 (the last sessions read 0.85-0.89
# for the kernel that held both scale paths): the per-block loss was mostly the other path's code.
# So where does the shipped kernel lose its ~20% a clock at Flash now? The ablations again on the
# template kernel, Flash at 12288 and 49152 rows (--tile 192), x 2 rounds alternating:
#   main; a2 nothing stored; a3 no loads; a4 = a3 + a2; a5 = a4 + no scale copies; a5solo
# Then Nsight Compute (sections only: call 3's metric regex is not accepted) on the probe's step,
# a5 and main at Flash GEMM1 12288 rows.
# Prediction: a5 at ~0.97 a MHz like long-k; a3 (no loads) close to a5: the loads are what costs.
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session39/run4.sh   (carry .deps)
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
for a in 2 3 4 5; do lab_variant a$a "-DMM_WIDE_ABLATE=$a"; done
lab_variant a5solo "-DMM_WIDE_ABLATE=5 -DMM_WIDE_SOLO=1"
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/rs_tile_probe tests/gpu/rs_tile_probe.cu 2>&1 | grep -v C751
lab_wait_variants || exit 1
echo "built in $((SECONDS - t0)) s"
for round in 1 2; do
    if [ $round = 1 ]; then order="main a2 a3 a4 a5 a5solo"; else order="a5solo a5 a4 a3 a2 main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        want=1; [ $v = main ] && want=0
        lab_run $want flash-$v-r$round mpirun --bind-to none -np 1 $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 10 --tile 192
        lab_show flash-$v-r$round $v r$round
    done
done
NCU=${NCU:-/usr/local/cuda/bin/ncu}
profile() { # name, kernel regex, command...
    local name=$1 k=$2 t=$SECONDS rc
    shift 2
    timeout 150 $NCU -k regex:$k -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
        --section SourceCounters -f -o /tmp/rep-$name "$@" > $LAB_LOGS/ncu-run-$name.log 2>&1 </dev/null
    rc=$?
    echo "ncu $name rc=$rc $((SECONDS - t)) s"
    [ -f /tmp/rep-$name.ncu-rep ] || { tail -5 $LAB_LOGS/ncu-run-$name.log; return; }
    $NCU -i /tmp/rep-$name.ncu-rep --page source --print-source sass --csv > /tmp/src-$name.csv 2>/dev/null
    python3 scripts/ncu-stalls.py /tmp/src-$name.csv 40 > $LAB_LOGS/stalls-$name.txt 2>&1
    $NCU -i /tmp/rep-$name.ncu-rep --page details > $LAB_LOGS/details-$name.txt 2>&1
    $NCU -i /tmp/rep-$name.ncu-rep --page raw > $LAB_LOGS/raw-$name.txt 2>&1
    grep -iE "Executed Ipc|SM Busy|Issue Slots|Duration|SM Frequency" $LAB_LOGS/details-$name.txt | head -8
    grep -iE "tensor|gmma" $LAB_LOGS/raw-$name.txt | head -12
    head -6 $LAB_LOGS/stalls-$name.txt
}
profile probe rs_probe build/rs_tile_probe 4000 4 2 0 0
profile a5 grouped_gemm_wide build/a5/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288 --iters 1 --warmup 0 --tile 192
profile main grouped_gemm_wide build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288 --iters 1 --warmup 0 --tile 192
lab_pack $OUT
echo "total $((SECONDS - t0)) s"
