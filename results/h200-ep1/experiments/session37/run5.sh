#!/bin/bash
# Session 37, call 5: is it the pair's lockstep? Call 4 found the kernel at ~0.77 TFLOP/s a MHz
# with no loads at all, against the probe's 1.07. Variants: each CTA of a pair loading its own A
# and freeing its stages alone (-DMM_WIDE_SOLO=1, correct outputs), no loads (-DMM_WIDE_ABLATE=3),
# and both; Flash EP8 12288 / 49152 rows, x 2 rounds, sides alternating; then ragged rows on solo.
# One H200, carry [".deps"]:  GIT_REV=<rev> bash .../run5.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant solo "-DMM_WIDE_SOLO=1"
lab_variant noload "-DMM_WIDE_ABLATE=3"
lab_variant noloadsolo "-DMM_WIDE_ABLATE=3 -DMM_WIDE_SOLO=1"
lab_wait_variants || exit 1
echo "built in $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
show() { grep -E '^gemm[12] ' $LAB_LOGS/$1.log | awk -v v=$2 '{printf "%-10s %s %6s %8s us %7s TF/s %s MHz  %.3f TF/s a MHz %s\n", v, $1, $2, $9, $10, $15, $10/$15, $14}'; }
for round in 1 2; do
    if [ $round = 1 ]; then order="main solo noload noloadsolo"; else order="noloadsolo noload solo main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        lab_run 0 flash-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 20 --tile 192
        show flash-$v-r$round $v
    done
done
for c in "configs/tiny.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed" "tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed" \
         "tests/configs/small-h640.json --ep 2 --rows 1,37,300,2000 --spread skewed" "configs/deepseek-v4-pro.json --ep 8 --rows 20000,49152 --spread skewed"; do
    name=$(echo $c | cut -d' ' -f1 | xargs basename .json)
    lab_run 0 check-solo-$name build/solo/megamoe gemm --config $c --tile 192 --iters 3
    echo "  solo $name: $(grep -cE '^gemm[12] .* OK ' $LAB_LOGS/check-solo-$name.log) of $(grep -cE '^gemm[12] ' $LAB_LOGS/check-solo-$name.log) rows OK"
done
tar czf $OUT/run5-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
