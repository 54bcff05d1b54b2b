#!/bin/bash
# Session 37, call 4: where the wide form's K loop loses its clocks at 49152 rows. The probe's
# wide step runs at 0.99-1.04 TFLOP/s a MHz with loads (96% of the FP8 peak a clock), the kernel at
# ~0.72. Ablations of the real kernel (timing only, outputs wrong): no loads (-DMM_WIDE_ABLATE=3,
# the stages only signalled), nothing stored (=2), loads alone (=1); Flash EP8 12288 / 49152 rows,
# x 2 rounds, sides alternating. One H200, carry [".deps"]:  GIT_REV=<rev> bash .../run4.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant noload "-DMM_WIDE_ABLATE=3"
lab_variant nostore "-DMM_WIDE_ABLATE=2"
lab_variant loadsonly "-DMM_WIDE_ABLATE=1"
lab_wait_variants || exit 1
echo "built in $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
show() { grep -E '^gemm[12] ' $LAB_LOGS/$1.log | awk -v v=$2 '{printf "%-9s %s %6s %8s us %7s TF/s %s MHz  %.3f TF/s a MHz\n", v, $1, $2, $9, $10, $15, $10/$15}'; }
for round in 1 2; do
    if [ $round = 1 ]; then order="main noload nostore loadsonly"; else order="loadsonly nostore noload main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        lab_run 0 flash-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 20 --tile 192
        show flash-$v-r$round $v
    done
done
tar czf $OUT/run4-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
