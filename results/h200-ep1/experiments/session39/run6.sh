#!/bin/bash
# Call 6 of the thirty-ninth session: are main's operand waits at an item's first block (call 4:
# its scale slot and its stage, 5.5% of the samples at Flash GEMM1 12288 rows) every item's, or
# each CTA's first (ncu flushes the caches before its passes: cold HBM and TLBs)? Three ncu
# profiles of the shipped kernel, Flash GEMM1 (--tile 192):
#   c12288   12288 rows, ncu's default cache control (call 4's run again: 16 items a CTA)
#   n12288   12288 rows, --cache-control none (the caches as the previous pass left them)
#   c49152   49152 rows, default (64 items a CTA)
# Prediction: if it is each CTA's first item, the first block's wait share falls ~4x at 49152 and
# mostly goes with --cache-control none; if every item's, it stays ~5%.
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session39/run6.sh   (carry .deps)
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
NCU=${NCU:-/usr/local/cuda/bin/ncu}
profile() { # name, cache control, rows
    local name=$1 t=$SECONDS
    timeout 150 $NCU -k regex:grouped_gemm_wide -c 1 --cache-control $2 --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section WarpStateStats --section SourceCounters -f -o /tmp/rep-$name build/megamoe gemm --config configs/deepseek-v4-flash.json \
        --ep 8 --rows $3 --iters 1 --warmup 0 --tile 192 > $LAB_LOGS/ncu-run-$name.log 2>&1 </dev/null
    echo "ncu $name rc=$? $((SECONDS - t)) s"
    [ -f /tmp/rep-$name.ncu-rep ] || { tail -5 $LAB_LOGS/ncu-run-$name.log; return; }
    $NCU -i /tmp/rep-$name.ncu-rep --page source --print-source sass --csv > $LAB_LOGS/src-$name.csv 2>/dev/null
    python3 scripts/ncu-stalls.py $LAB_LOGS/src-$name.csv 40 > $LAB_LOGS/stalls-$name.txt 2>&1
    gzip -f $LAB_LOGS/src-$name.csv
    $NCU -i /tmp/rep-$name.ncu-rep --page details > $LAB_LOGS/details-$name.txt 2>&1
    $NCU -i /tmp/rep-$name.ncu-rep --page raw > $LAB_LOGS/raw-$name.txt 2>&1
    grep -iE "SM Frequency|Duration" $LAB_LOGS/details-$name.txt | head -2
    grep -E "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" $LAB_LOGS/raw-$name.txt
    head -12 $LAB_LOGS/stalls-$name.txt
}
profile c12288 all 12288
profile n12288 none 12288
profile c49152 all 49152
lab_pack $OUT
echo "total $((SECONDS - t0)) s"
