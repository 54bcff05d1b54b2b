# Session 36, call 3: pairs kept busy only as many as the waves need (gemm_busy_pairs /
# mm_fewest_pairs, in both GEMM kernels, the default) against every launched pair busy
# (-DMM_GEMM_FEWEST_PAIRS=0), x 3 rounds, sides alternating: Flash EP8 at 4096 rows (128 x 128
# pairs: 8 waves on 64 pairs instead of 66), 12288 (wide: 16 waves on 64) and 49152 (66 both),
# Pro at 12288 (wide: 64 pairs), Flash skewed on the wide form; bench EP1 normal and ll (the core's
# pairs inside the modes); then correctness of the new default: ragged rows on both forms, check.
# One H200, carry [".deps"], ~5 min:  GIT_REV=<rev> bash results/h200-ep1/experiments/session36/run3.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant allpairs "-DMM_GEMM_FEWEST_PAIRS=0"
lab_wait_variants || exit 1
echo "built in $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
show() { grep -E '^gemm[12] ' $LAB_LOGS/$1.log | awk -v v=$2 '{printf "%-9s %s %6s %8s us %7s TF/s %s MHz %s lt %s us\n", v, $1, $2, $9, $10, $15, $14, $16}'; }
for round in 1 2 3; do
    if [ $((round % 2)) = 1 ]; then order="main allpairs"; else order="allpairs main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        lab_run 0 flash-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 4096,12288,49152 --iters 20
        show flash-$v-r$round $v
        lab_run 0 pro-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 12288 --iters 20
        show pro-$v-r$round $v
        lab_run 0 skew-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 20000 --spread skewed --tile 192 --iters 20
        show skew-$v-r$round $v
        lab_run 0 bench-$v-r$round $mpi $bin bench --config configs/deepseek-v4-flash.json --batches 1024,4096 --modes normal,ll --iters 30
        grep -E 'megamoe: (normal|ll) +batch' $LAB_LOGS/bench-$v-r$round.log | sed "s/^megamoe:/$v/"
    done
done
for c in "configs/tiny.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed" "tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed" \
         "tests/configs/small-h640.json --ep 2 --rows 1,37,300,2000 --spread skewed" "tests/configs/small-n2048.json --ep 2 --rows 1,3,37,129,300,2000,5000 --spread skewed"; do
    name=$(echo $c | cut -d' ' -f1 | xargs basename .json)
    for tile in 128 192; do
        lab_run 0 check-$name-$tile $mpi build/megamoe gemm --config $c --tile $tile --iters 3
        echo "  $name tile $tile: $(grep -cE '^gemm[12] .* OK ' $LAB_LOGS/check-$name-$tile.log) of $(grep -cE '^gemm[12] ' $LAB_LOGS/check-$name-$tile.log) rows OK"
    done
done
lab_run 0 check-np1 $mpi build/megamoe check
tail -3 $LAB_LOGS/check-np1.log
grep -h 'error\|warning' $LAB_LOGS/*.log | grep -v "^#\|^gcc\|^nvcc" | head
tar czf $OUT/run3-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
