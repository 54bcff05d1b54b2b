#!/bin/bash
# Session 37, call 8: the wide K loop on barrier addresses computed once (-DMM_WIDE_LEAN=1): its
# waits and stage release no longer read the CTA's cluster id (S2UR) between a block's MMAs and
# the next block's, and the release is predicated (no branch, no reconvergence). Against main, x 3
# rounds, sides alternating, Flash EP8 12288 / 49152 and Pro 12288; lean with ablation 5 (no loads,
# stores or scale copies) for the skeleton's ceiling; ragged rows on lean. carry [".deps"].
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant lean "-DMM_WIDE_LEAN=1"
lab_variant a5 "-DMM_WIDE_ABLATE=5"
lab_variant a5lean "-DMM_WIDE_ABLATE=5 -DMM_WIDE_LEAN=1"
lab_wait_variants || exit 1
echo "built in $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
show() { grep -E '^gemm[12] ' $LAB_LOGS/$1.log | awk -v v=$2 '{printf "%-7s %s %6s %8s us %7s TF/s %s MHz  %.3f TF/s a MHz %s\n", v, $1, $2, $9, $10, $15, $10/$15, $14}'; }
for round in 1 2 3; do
    if [ $((round % 2)) = 1 ]; then order="main lean a5 a5lean"; else order="a5lean a5 lean main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        lab_run 0 flash-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 20 --tile 192 > /dev/null
        show flash-$v-r$round $v
        case $v in main|lean)
            lab_run 0 pro-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 12288 --iters 20 --tile 192 > /dev/null
            show pro-$v-r$round $v;;
        esac
    done
done
for c in "configs/tiny.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed" "tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed" \
         "tests/configs/small-h640.json --ep 2 --rows 1,37,300,2000 --spread skewed" "configs/deepseek-v4-pro.json --ep 8 --rows 20000 --spread skewed"; do
    name=$(echo $c | cut -d' ' -f1 | xargs basename | sed 's/.json//')
    lab_run 0 check-lean-$name build/lean/megamoe gemm --config $c --tile 192 --iters 3 > /dev/null
    echo "  lean $name: $(grep -cE '^gemm[12] .* OK ' $LAB_LOGS/check-lean-$name.log) of $(grep -cE '^gemm[12] ' $LAB_LOGS/check-lean-$name.log) rows OK"
done
tar czf $OUT/run8-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
