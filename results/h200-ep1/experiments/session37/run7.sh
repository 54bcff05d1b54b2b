#!/bin/bash
# Session 37, call 7: what is left of the kernel's structure without loads. Call 5: no loads
# ~0.78 TFLOP/s a MHz with or without the pair's lockstep, the probe's step 1.05 at the same clock.
# Ablations (timing only): 3 no loads, 4 = 3 and nothing stored, 5 = 4 and no scale copies, and 5
# with solo CTAs (-DMM_WIDE_SOLO=1); Flash EP8 12288 / 49152 rows, x 2 rounds, sides alternating.
# One H200, carry [".deps"]:  GIT_REV=<rev> bash .../run7.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant a3 "-DMM_WIDE_ABLATE=3"
lab_variant a4 "-DMM_WIDE_ABLATE=4"
lab_variant a5 "-DMM_WIDE_ABLATE=5"
lab_variant a5solo "-DMM_WIDE_ABLATE=5 -DMM_WIDE_SOLO=1"
lab_wait_variants || exit 1
echo "built in $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
show() { grep -E '^gemm[12] ' $LAB_LOGS/$1.log | awk -v v=$2 '{printf "%-7s %s %6s %8s us %7s TF/s %s MHz  %.3f TF/s a MHz\n", v, $1, $2, $9, $10, $15, $10/$15}'; }
for round in 1 2; do
    if [ $round = 1 ]; then order="main a3 a4 a5 a5solo"; else order="a5solo a5 a4 a3 main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        lab_run 0 flash-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 20 --tile 192 > /dev/null
        show flash-$v-r$round $v
    done
done
tar czf $OUT/run7-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
