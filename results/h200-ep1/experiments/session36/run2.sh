# Session 36, call 2: does a power-capped wide GEMM need every SM? The wide form on 66 pairs (all
# 132 SMs), 64 pairs (128) and 60 pairs (120 SMs, what clusters of 4 leave on an H200), Flash EP8
# at 12288 and 49152 rows, x 2 rounds in alternating order, with joules a call (1 s windows).
# One H200, carry [".deps"], ~5 min:  GIT_REV=<rev> bash results/h200-ep1/experiments/session36/run2.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant pairs64 "-DMM_LAB_WIDE_PAIRS=64"
lab_variant pairs60 "-DMM_LAB_WIDE_PAIRS=60"
lab_wait_variants || exit 1
echo "built in $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
args="gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 10 --energy-ms 1000"
for round in 1 2; do
    if [ $round = 1 ]; then order="main pairs64 pairs60"; else order="pairs60 pairs64 main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        lab_run 0 $v-r$round $mpi $bin $args
        grep -E '^gemm[12] ' $LAB_LOGS/$v-r$round.log | awk -v v=$v '{printf "%-8s %s %6s %8s us %7s TF/s %s MHz lt %s us\n", v, $1, $2, $9, $10, $15, $16}'
        grep -E '^energy gemm' $LAB_LOGS/$v-r$round.log | sed -E 's/\(([0-9]+) calls.*cuBLASLt/cuBLASLt/' | sed "s/^/$v /"
    done
done
grep -h 'error\|warning' $LAB_LOGS/*.log | grep -v "^#" | head
cp $LAB_LOGS/*.log $OUT/
echo "total $((SECONDS-t0)) s"
