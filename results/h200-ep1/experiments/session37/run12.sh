#!/bin/bash
# Prepared for the next session (not run in the thirty-seventh: no device time left). Bisects the
# skeleton's ~20% a clock (perf-notes, thirty-seventh session: with no loads, stores or scale
# copies and solo pairs the wide kernel runs 0.84 TFLOP/s a MHz against the probe's step at 1.07)
# into a per-K-block and a per-item part, with items of 256 K blocks and of 1:
#   long-k.json at EP8 (one local expert), 12672 rows = 66 row tiles of 192:
#     GEMM1 N 256 (one pair item a row tile), K 32768: 66 pair items of 256 K blocks, one wave;
#     GEMM2 N 32768, K 128: 8448 pair items of one K block (128 waves).
#   50688 rows: four waves of GEMM1's long items.
# Builds: main (lean), old (-DMM_WIDE_LEAN=0), a5 and a5solo (timing only), and a5 with per-block
# scales in the stages (-DMM_WIDE_GROUP_SCALES=0); x 2 rounds, sides alternating; Flash 49152 too.
# Prediction: if the skeleton's loss is per K block, GEMM1 of long-k reads ~0.84 a MHz in a5solo
# like Flash; if per item, it reads close to the probe's 1.05 and GEMM2's one-block items collapse.
# One H200, carry [".deps"]:  GIT_REV=<rev> bash results/h200-ep1/experiments/session37/run12.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant old "-DMM_WIDE_LEAN=0"
lab_variant a5 "-DMM_WIDE_ABLATE=5"
lab_variant a5solo "-DMM_WIDE_ABLATE=5 -DMM_WIDE_SOLO=1"
lab_variant a5stage "-DMM_WIDE_ABLATE=5 -DMM_WIDE_GROUP_SCALES=0"
lab_wait_variants || exit 1
echo "built in $((SECONDS-t0)) s"
cfg=results/h200-ep1/experiments/session37/long-k.json
show() { grep -E '^gemm[12] ' $LAB_LOGS/$1.log | awk -v v=$2 '{printf "%-8s %s %6s %8s us %7s TF/s %s MHz  %.3f TF/s a MHz %s\n", v, $1, $2, $9, $10, $15, $10/$15, $14}'; }
for round in 1 2; do
    if [ $round = 1 ]; then order="main old a5 a5solo a5stage"; else order="a5stage a5solo a5 old main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        lab_run 0 longk-$v-r$round mpirun --bind-to none -np 1 $bin gemm --config $cfg --ep 8 --rows 12672,50688 --iters 10 --tile 192 > /dev/null < /dev/null
        show longk-$v-r$round $v
        lab_run 0 flash-$v-r$round mpirun --bind-to none -np 1 $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 49152 --iters 10 --tile 192 > /dev/null < /dev/null
        show flash-$v-r$round $v
    done
done
tar czf $OUT/run12-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
