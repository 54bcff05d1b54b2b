# Prepared in session 33 (no device time left to run it): the output's path in the GEMM core's
# epilogue. Call 7 found storing nothing 7% faster on Flash GEMM2 at 49152 rows while the fence,
# the wait and the shared stores cost <= 1% each: what is left is the tensor copies themselves
# (their bytes through the SM's copy engine and L2). Variants (kernels/gemm.cu, default off):
# -DMM_GEMM_STORE_HINT=1 the copies with an L2 evict_first policy; -DMM_GEMM_STORE_GLOBAL=1 the
# warpgroup's threads copy the boxes with 16-byte stores instead; -DMM_WIDE_ABLATE=6 box 0 alone
# (half the bytes, timing only). Checks of the two correct variants on both tile forms first.
# One H200, carry [".deps"], ~3-4 min: GIT_REV=<rev> bash results/h200-ep1/experiments/session33/run8.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant hint "-DMM_GEMM_STORE_HINT=1"
lab_variant global "-DMM_GEMM_STORE_GLOBAL=1"
lab_variant abl6 "-DMM_WIDE_ABLATE=6"
lab_wait_variants || exit 1
echo "built $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
for b in hint global; do
    for tile in 128 192; do
        lab_run 0 $b-tiny-$tile $mpi build/$b/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,37,200,3000 --spread skewed --tile $tile --iters 3
        lab_run 0 $b-n2048-$tile $mpi build/$b/megamoe gemm --config tests/configs/small-n2048.json --ep 2 --rows 37,300,2000,9000 --spread skewed --tile $tile --iters 3
        lab_run 0 $b-flash-$tile $mpi build/$b/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 3000,20000 --spread skewed --tile $tile --iters 3
    done
done
lab_ok_rows
for i in 1 2; do
    for b in full hint global abl6; do
        bin=build/$b/megamoe; [ $b = full ] && bin=build/megamoe
        lab_run $([ $b = abl6 ] && echo 1 || echo 0) t-$b-$i $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 4096,12288,49152 --iters 20
    done
done
for f in $LAB_LOGS/t-*.log; do
    printf '%-12s %s\n' "$(basename $f .log)" "$(grep -E '^gemm[12] ' $f | awk '{printf "%s/%s %s us %s TF/s | ", $1, $2, $9, $10}')"
done | tee $OUT/store-path.txt
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
