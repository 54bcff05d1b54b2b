#!/bin/bash
# Session 38, call 5: the wide form's scale copies chosen at run time (gemm --wide-scales
# group|block; the kernel's `grouped` now also reads args.wide_block_scales), against each other
# and against the compile-time per-block build of call 4 (stage: -DMM_WIDE_GROUP_SCALES=0, which
# also drops the grouped code and its slots), x 2 rounds, sides alternating, at shapes that tell
# the two apart: Flash EP8 12288 / 49152 (K 4096 and 2048), Pro EP8 9216 (one full tile an
# expert) / 49152 on 192-row tiles (K 7168 and 3072), V3 EP8 12288 (K 7168 and 2048).
# Correctness of the run-time switch first: the ragged rows in both modes and racecheck of block.
# carry [".deps"];  GIT_REV=<rev> bash results/h200-ep1/experiments/session38/run5.sh
set -u
. scripts/lab.sh
L=$OUT/call5; mkdir -p $L
t0=$SECONDS
lab_build $L || exit 1
lab_variant stage "-DMM_WIDE_GROUP_SCALES=0"
mpi="mpirun --bind-to none -np 1"
{
for mode in group block; do
    for c in "configs/deepseek-v4-flash.json --ep 8 --rows 37,3000,20000" "configs/deepseek-v4-pro.json --ep 8 --rows 20000" \
             "tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000" "tests/configs/small-h640.json --ep 2 --rows 1,37,300,2000" \
             "tests/configs/small-n2048.json --ep 2 --rows 1,3,37,129,300,2000,5000" "configs/tiny.json --ep 2 --rows 1,3,37,129,300,2000"; do
        name=$mode-$(echo $c | cut -d' ' -f1 | xargs basename | sed 's/.json//')
        lab_run 0 rows-$name build/megamoe gemm --config $c --spread skewed --tile 192 --wide-scales $mode --iters 3 > /dev/null
        echo "$name: $(grep -cE '^gemm[12] .* OK ' $LAB_LOGS/rows-$name.log) of $(grep -cE '^gemm[12] ' $LAB_LOGS/rows-$name.log) rows OK"
    done
done
lab_run 0 san-racecheck-block $mpi compute-sanitizer --tool racecheck --report-api-errors no build/megamoe gemm \
    --config tests/configs/small-k512.json --ep 2 --rows 1,37,300 --spread skewed --tile 192 --wide-scales block --iters 1 --warmup 0
echo "block racecheck: $(grep -h 'RACECHECK SUMMARY' $LAB_LOGS/san-racecheck-block.log); outside the known class: $(scripts/racecheck-unknown.sh $LAB_LOGS/san-racecheck-block.log)"
lab_run 0 san-memcheck-block $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no build/megamoe gemm \
    --config tests/configs/small-k512.json --ep 2 --rows 1,37,300 --spread skewed --tile 192 --wide-scales block --iters 1 --warmup 0
grep -h "ERROR SUMMARY" $LAB_LOGS/san-memcheck-block.log
} 2>&1 | tee $L/correctness.txt
lab_wait_variants || exit 1
echo "built and checked in $((SECONDS-t0)) s"
show() { grep -E '^gemm[12] ' $LAB_LOGS/$1.log | awk -v v=$2 -v c=$3 '{printf "%-5s %-5s %s %6s %8s us %7s TF/s %s MHz  %.3f TF/s a MHz %s\n", c, v, $1, $2, $9, $10, $15, $10/$15, $14}'; }
for round in 1 2; do
    if [ $round = 1 ]; then order="group block stage"; else order="stage block group"; fi
    for v in $order; do
        case $v in group|block) bin="build/megamoe"; extra="--wide-scales $v";; stage) bin=build/stage/megamoe; extra="";; esac
        for cfg in "flash:configs/deepseek-v4-flash.json --rows 12288,49152" "pro:configs/deepseek-v4-pro.json --rows 9216,49152" "v3:configs/deepseek-v3.json --rows 12288"; do
            tag=${cfg%%:*}
            lab_run 0 $tag-$v-r$round $mpi $bin gemm --config ${cfg#*:} --ep 8 --iters 20 --tile 192 $extra > /dev/null
            show $tag-$v-r$round $v $tag
        done
    done
done 2>&1 | tee $L/ab.txt
tar czf $OUT/run5-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
