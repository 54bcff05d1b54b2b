# Session 34, call 2 (run at 14e85c8, where -DMM_GEMM_CLOCK=0 still existed): the GEMM core's clock reads (gemm's MHz column). gpu-check with
# GPU_CHECK_TOOLS=0 on the new tree (every check, the headline gemm and EP1 bench files), then
# an A/B of the clock reads' cost: the default build against -DMM_GEMM_CLOCK=0 (the same kernels
# without the reads: its SASS differs from the tree before them only in global addresses), side by
# side, x 2, the side that runs first alternating: `gemm` over Flash's decode to 49152 rows (both
# tile forms) and `bench --modes ll,normal` at EP1 (the 128 x 128 core in the pipelines).
# One H200, carry [".deps"], ~6 min:
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session34/run2.sh
set -u
t0=$SECONDS
GPU_CHECK_TOOLS=0 bash scripts/gpu-check.sh /tmp/gc > $OUT/gc-summary.txt 2>&1
echo "gpu-check rc=$? $((SECONDS-t0)) s"
cp /tmp/gc/gpu-check-logs.tgz $OUT/ 2>/dev/null
. scripts/lab.sh
lab_build $OUT || exit 1
lab_variant noclock "-DMM_GEMM_CLOCK=0"
lab_wait_variants || exit 1
echo "built $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
for i in 1 2; do
    sides="clock noclock"; [ $i = 2 ] && sides="noclock clock"
    for b in $sides; do
        bin=build/noclock/megamoe; [ $b = clock ] && bin=build/megamoe
        lab_run 0 g-$b-$i $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,64,512,4096,12288,49152 --iters 20
    done
    for b in $sides; do
        bin=build/noclock/megamoe; [ $b = clock ] && bin=build/megamoe
        lab_run 0 b-$b-$i $mpi $bin bench --config configs/deepseek-v4-flash.json --modes ll,normal --batches 1,64,512,1024,4096 --iters 20
    done
done
for f in $LAB_LOGS/g-*.log; do
    printf '%-14s %s\n' "$(basename $f .log)" "$(grep -E '^gemm[12] ' $f | awk '{printf "%s/%s %s us %s MHz | ", $1, $2, $9, $15}')"
done | tee $OUT/clock-ab.txt
for f in $LAB_LOGS/b-*.log; do echo "== $(basename $f .log)"; grep -E "megamoe: (ll|normal) +batch" $f; done | tee -a $OUT/clock-ab.txt
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
