# Session 36, call 3: the wide launch on the fewest pairs that take as many waves
# (mm_wide_launch_pairs, the default) against every resident pair (-DMM_WIDE_FEWEST_PAIRS=0), x 3
# rounds, sides alternating: Flash and Pro EP8 at 12288 rows (64 pairs instead of 66), Flash at
# 49152 (66 both), Flash skewed; then the ragged wide checks on the new default.
# One H200, carry [".deps"], ~4 min:  GIT_REV=<rev> bash results/h200-ep1/experiments/session36/run3.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant allpairs "-DMM_WIDE_FEWEST_PAIRS=0"
lab_wait_variants || exit 1
echo "built in $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
show() { grep -E '^gemm[12] ' $LAB_LOGS/$1.log | awk -v v=$2 '{printf "%-9s %s %6s %8s us %7s TF/s %s MHz %s lt %s us\n", v, $1, $2, $9, $10, $15, $14, $16}'; }
for round in 1 2 3; do
    if [ $((round % 2)) = 1 ]; then order="main allpairs"; else order="allpairs main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        lab_run 0 flash-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 20
        show flash-$v-r$round $v
        lab_run 0 pro-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 12288 --iters 20
        show pro-$v-r$round $v
        lab_run 0 skew-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 20000 --spread skewed --tile 192 --iters 20
        show skew-$v-r$round $v
    done
done
for c in "configs/tiny.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed" "tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed" \
         "tests/configs/small-h640.json --ep 2 --rows 1,37,300,2000 --spread skewed" "tests/configs/small-n2048.json --ep 2 --rows 1,3,37,129,300,2000,5000 --spread skewed"; do
    name=$(echo $c | cut -d' ' -f1 | xargs basename .json)
    lab_run 0 check-$name $mpi build/megamoe gemm --config $c --tile 192 --iters 3
    echo "  $name: $(grep -cE '^gemm[12] .* OK ' $LAB_LOGS/check-$name.log) rows OK, $(grep -cE '^gemm[12] ' $LAB_LOGS/check-$name.log) rows"
done
grep -h 'error\|warning' $LAB_LOGS/*.log | grep -v "^#\|^gcc\|^nvcc" | head
tar czf $OUT/run3-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
