# Session 34, call 5: how often Flash at 49152 rows reaches 1150 TFLOP/s, with the clock each run
# held: five runs of gemm --rows 12288,49152 --iters 20 in one call (d1992c7's code).
# One H200, carry [".deps"], ~2 min:   GIT_REV=<rev> bash results/h200-ep1/experiments/session34/run5.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
mpi="mpirun --bind-to none -np 1"
for i in 1 2 3 4 5; do
    lab_run 0 flash-$i $mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 20
done
lab_ok_rows
for f in $LAB_LOGS/flash-*.log; do
    printf '%-8s %s\n' "$(basename $f .log)" "$(grep -E '^gemm[12] ' $f | awk '{printf "%s/%s %s us %s TF/s %s MHz lt %s | ", $1, $2, $9, $10, $15, $16}')"
done | tee $OUT/flash-49152.txt
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
