#!/bin/bash
# Session 38, call 4: in call 3 (run12) the skeleton with per-block scales in the stages (a5stage:
# -DMM_WIDE_ABLATE=5 -DMM_WIDE_GROUP_SCALES=0) ran 3-6% more TFLOP/s a MHz than the grouped one
# (a5) at Flash 49152. Here the real kernel: main (scales 4 K blocks at a time into the slots)
# against -DMM_WIDE_GROUP_SCALES=0 (each block's scales into its stage by the producer's 128
# threads), x 3 rounds, sides alternating, Flash EP8 12288 / 49152, Pro EP8 12288; the variant's
# rows at model shapes (skewed) and its racecheck on small-k512 judged by racecheck-unknown.sh.
# carry [".deps"];  GIT_REV=<rev> bash results/h200-ep1/experiments/session38/run4.sh
set -u
. scripts/lab.sh
L=$OUT/call4; mkdir -p $L
t0=$SECONDS
lab_build $L || exit 1
lab_variant stage "-DMM_WIDE_GROUP_SCALES=0"
lab_wait_variants || exit 1
echo "built in $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
show() { grep -E '^gemm[12] ' $LAB_LOGS/$1.log | awk -v v=$2 '{printf "%-5s %s %6s %8s us %7s TF/s %s MHz  %.3f TF/s a MHz %s\n", v, $1, $2, $9, $10, $15, $10/$15, $14}'; }
for round in 1 2 3; do
    if [ $((round % 2)) = 1 ]; then order="main stage"; else order="stage main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        lab_run 0 flash-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 20 --tile 192 > /dev/null
        show flash-$v-r$round $v
        lab_run 0 pro-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 12288 --iters 20 --tile 192 > /dev/null
        show pro-$v-r$round $v
    done
done 2>&1 | tee $L/ab.txt
{
for c in "configs/deepseek-v4-flash.json --ep 8 --rows 37,3000,20000" "configs/deepseek-v4-pro.json --ep 8 --rows 20000" \
         "tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000" "tests/configs/small-h640.json --ep 2 --rows 1,37,300,2000"; do
    name=$(echo $c | cut -d' ' -f1 | xargs basename | sed 's/.json//')
    lab_run 0 rows-stage-$name build/stage/megamoe gemm --config $c --spread skewed --tile 192 --iters 3 > /dev/null
    echo "stage $name: $(grep -cE '^gemm[12] .* OK ' $LAB_LOGS/rows-stage-$name.log) of $(grep -cE '^gemm[12] ' $LAB_LOGS/rows-stage-$name.log) rows OK"
done
lab_run 0 san-racecheck-stage $mpi compute-sanitizer --tool racecheck --report-api-errors no build/stage/megamoe gemm \
    --config tests/configs/small-k512.json --ep 2 --rows 1,37,300 --spread skewed --tile 192 --iters 1 --warmup 0
echo "stage racecheck: $(grep -h 'RACECHECK SUMMARY' $LAB_LOGS/san-racecheck-stage.log); outside the known class: $(scripts/racecheck-unknown.sh $LAB_LOGS/san-racecheck-stage.log)"
} 2>&1 | tee $L/correctness.txt
tar czf $OUT/run4-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
