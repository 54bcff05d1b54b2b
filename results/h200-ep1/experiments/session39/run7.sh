#!/bin/bash
# Call 7 of the thirty-ninth session (the last ~270 device seconds): the producer has L2 fetch its
# next item's first 2 K blocks (A, weights: TMA prefetch) and first scale group 8 blocks before
# its item ends (-DMM_WIDE_PREFETCH=1, kernels/gemm.cu) against main, Flash at 12288 and 49152
# rows (--tile 192, the wide form), x 2 rounds alternating.
# Prediction (call 6: the math waits at every item's first block, ~5% of the samples): if the
# first touch of an item's rows and columns is what is late, 2-5% faster; if not, even.
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session39/run7.sh   (carry .deps)
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant pf "-DMM_WIDE_PREFETCH=1"
lab_wait_variants || exit 1
echo "built in $((SECONDS - t0)) s"
for round in 1 2; do
    if [ $round = 1 ]; then order="main pf"; else order="pf main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        lab_run 0 flash-$v-r$round mpirun --bind-to none -np 1 $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 10 --tile 192
        lab_show flash-$v-r$round $v r$round
    done
done
lab_ok_rows
lab_pack $OUT
echo "total $((SECONDS - t0)) s"
