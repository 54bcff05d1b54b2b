#!/bin/bash
# Session 38, call 6: the wide kernel as a template on its scale copies (grouped_gemm_wide_kernel
# <true>: 4 K blocks at a time into slots; <false>: each block's into its stage), each compiled
# without the other's code (call 5: the per-block path compiled beside the grouped one ran 5-7%
# slower than compiled alone). Correctness of both first (ragged rows, racecheck judged by
# racecheck-unknown.sh, memcheck), then group against block, x 2 rounds, sides alternating, at
# Flash EP8 12288 / 49152, Pro EP8 9216 / 49152 and V3 EP8 12288 on 192-row tiles.
# carry [".deps"];  GIT_REV=<rev> bash results/h200-ep1/experiments/session38/run6.sh
set -u
. scripts/lab.sh
L=$OUT/call6; mkdir -p $L
t0=$SECONDS
lab_build $L || exit 1
echo "built in $((SECONDS-t0)) s"
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
    lab_run 0 san-racecheck-$mode $mpi compute-sanitizer --tool racecheck --report-api-errors no build/megamoe gemm \
        --config tests/configs/small-k512.json --ep 2 --rows 1,37,300 --spread skewed --tile 192 --wide-scales $mode --iters 1 --warmup 0 > /dev/null
    echo "$mode racecheck: $(grep -h 'RACECHECK SUMMARY' $LAB_LOGS/san-racecheck-$mode.log); outside the known class: $(scripts/racecheck-unknown.sh $LAB_LOGS/san-racecheck-$mode.log)"
    lab_run 0 san-memcheck-$mode $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no build/megamoe gemm \
        --config tests/configs/small-k512.json --ep 2 --rows 1,37,300 --spread skewed --tile 192 --wide-scales $mode --iters 1 --warmup 0 > /dev/null
    echo "$mode memcheck: $(grep -h 'ERROR SUMMARY' $LAB_LOGS/san-memcheck-$mode.log)"
done
} 2>&1 | tee $L/correctness.txt
echo "checked at $((SECONDS-t0)) s"
show() { grep -E '^gemm[12] ' $LAB_LOGS/$1.log | awk -v v=$2 -v c=$3 '{printf "%-5s %-5s %s %6s %8s us %7s TF/s %s MHz  %.3f TF/s a MHz %s\n", c, v, $1, $2, $9, $10, $15, $10/$15, $14}'; }
for round in 1 2; do
    if [ $round = 1 ]; then order="group block"; else order="block group"; fi
    for v in $order; do
        for cfg in "flash:configs/deepseek-v4-flash.json --rows 12288,49152" "pro:configs/deepseek-v4-pro.json --rows 9216,49152" "v3:configs/deepseek-v3.json --rows 12288"; do
            tag=${cfg%%:*}
            lab_run 0 $tag-$v-r$round $mpi build/megamoe gemm --config ${cfg#*:} --ep 8 --iters 20 --tile 192 --wide-scales $v > /dev/null
            show $tag-$v-r$round $v $tag
        done
    done
done 2>&1 | tee $L/ab.txt
tar czf $OUT/run6-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
