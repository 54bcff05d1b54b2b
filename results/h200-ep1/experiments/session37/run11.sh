#!/bin/bash
# Session 37, call 11: lean (the default now) against -DMM_WIDE_LEAN=0 at 49152 rows, Flash EP8,
# 5 rounds, sides alternating (the budget's last seconds). carry [".deps"].
set -u
. scripts/lab.sh
lab_build $OUT || exit 1
lab_variant old "-DMM_WIDE_LEAN=0"
lab_wait_variants || exit 1
for round in 1 2 3 4 5; do
    if [ $((round % 2)) = 1 ]; then order="lean old"; else order="old lean"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = lean ] || bin=build/$v/megamoe
        lab_run 0 f-$v-r$round mpirun --bind-to none -np 1 $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 49152 --iters 20 > /dev/null < /dev/null
        grep -E '^gemm[12] ' $LAB_LOGS/f-$v-r$round.log | awk -v v=$v -v r=$round '{printf "r%s %-4s %s %8s us %7s TF/s %s MHz\n", r, v, $1, $9, $10, $15}'
    done
done
