# Session 34, call 6 (run at 815b835; the flag was removed after it, both hints lost: run it
# from a checkout of 815b835): try_wait with a suspend-time hint (-DMM_WAIT_SUSPEND_NS=N: a thread whose
# barrier is not ready sleeps up to N ns, woken by the barrier, instead of polling again at once),
# on the idea that Flash at 49152 rows is power-bound (calls 2-5) and polls cost power and issue
# slots. Checks (ragged rows, both tile forms), then Flash 4096 / 12288 / 49152 x 2 rounds, the
# order of the builds rotating, with the MHz column. One H200, carry [".deps"], ~2.5 min:
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session34/run6.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant s1k "-DMM_WAIT_SUSPEND_NS=1000"
lab_variant s20k "-DMM_WAIT_SUSPEND_NS=20000"
lab_wait_variants || exit 1
echo "built $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
for b in s1k s20k; do
    for tile in 128 192; do
        lab_run 0 $b-tiny-$tile $mpi build/$b/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,37,200,3000 --spread skewed --tile $tile --iters 3
    done
done
lab_ok_rows
for i in 1 2; do
    order="full s1k s20k"; [ $i = 2 ] && order="s20k s1k full"
    for b in $order; do
        bin=build/$b/megamoe; [ $b = full ] && bin=build/megamoe
        lab_run 0 t-$b-$i $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 4096,12288,49152 --iters 20
    done
done
for f in $LAB_LOGS/t-*.log; do
    printf '%-10s %s\n' "$(basename $f .log)" "$(grep -E '^gemm[12] ' $f | awk '{printf "%s/%s %s us %s TF/s %s MHz | ", $1, $2, $9, $10, $15}')"
done | tee $OUT/suspend.txt
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
