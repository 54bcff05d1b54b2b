#!/bin/bash
# Call 3 of the thirty-ninth session: where the wide kernel's skeleton loses ~15% a clock against
# the RS-tile probe's step (perf-notes, thirty-seventh and thirty-eighth sessions: both loops are
# the same instructions but for the release's branch; clusters cost the probe nothing, call 1).
# Nsight Compute (clocks at base, ncu's default) on three kernels, each its math loop's warp
# states per instruction and the tensor pipe's activity:
#   probe  the probe's wide step, no loads (tests/gpu/rs_tile_probe.cu, 4000 K blocks a CTA)
#   a5solo the kernel with no loads, stores or scale copies, solo pairs, long-k GEMM1 at 50688
#          rows (items of 256 K blocks, four waves)
#   main   the kernel as shipped, Flash GEMM1 at 12288 rows (--tile 192)
# Prediction: the probe's tensor pipe ~97% active, a5solo ~82%; the difference shows as math
# warps waiting at the `full` barrier's try_wait (the producer late) or at the wgmma wait (the
# tensor pipe shared unevenly between the three warpgroups).
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session39/run3.sh   (carry .deps)
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant a5solo "-DMM_WIDE_ABLATE=5 -DMM_WIDE_SOLO=1"
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/rs_tile_probe tests/gpu/rs_tile_probe.cu 2>&1 | grep -v C751
lab_wait_variants || exit 1
echo "built in $((SECONDS - t0)) s"
cfg=results/h200-ep1/experiments/session37/long-k.json
lab_run 0 time-a5solo mpirun --bind-to none -np 1 build/a5solo/megamoe gemm --config $cfg --ep 8 --rows 12672,50688 --iters 10 --tile 192
lab_show time-a5solo a5solo
lab_run 0 time-main-longk mpirun --bind-to none -np 1 build/megamoe gemm --config $cfg --ep 8 --rows 12672,50688 --iters 10 --tile 192
lab_show time-main-longk main
NCU=${NCU:-/usr/local/cuda/bin/ncu}
profile() { # name, kernel regex, command...
    local name=$1 k=$2 t=$SECONDS rc
    shift 2
    timeout 150 $NCU -k regex:$k -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
        --section SourceCounters --metrics regex:sm__pipe_tensor_op_gmma.*,regex:sm__inst_executed_pipe_tensor_op_gmma.* \
        -f -o /tmp/rep-$name "$@" > $LAB_LOGS/ncu-run-$name.log 2>&1 </dev/null
    rc=$?
    echo "ncu $name rc=$rc $((SECONDS - t)) s"
    [ -f /tmp/rep-$name.ncu-rep ] || return
    $NCU -i /tmp/rep-$name.ncu-rep --page source --print-source sass --csv > /tmp/src-$name.csv 2>/dev/null
    python3 scripts/ncu-stalls.py /tmp/src-$name.csv 40 > $LAB_LOGS/stalls-$name.txt 2>&1
    $NCU -i /tmp/rep-$name.ncu-rep --page details > $LAB_LOGS/details-$name.txt 2>&1
    $NCU -i /tmp/rep-$name.ncu-rep --page raw --csv > $LAB_LOGS/raw-$name.csv 2>&1
    grep -iE "gmma|Executed Ipc|SM Busy|Issue Slots|Duration|SM Frequency" $LAB_LOGS/details-$name.txt | head -20
    head -14 $LAB_LOGS/stalls-$name.txt
}
profile probe rs_probe build/rs_tile_probe 4000 4 2 0 0
profile a5solo grouped_gemm_wide build/a5solo/megamoe gemm --config $cfg --ep 8 --rows 50688 --iters 1 --warmup 0 --tile 192
profile main grouped_gemm_wide build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288 --iters 1 --warmup 0 --tile 192
lab_pack $OUT
echo "total $((SECONDS - t0)) s"
