# Session 33, call 7 (ablations 3-5 removed in the thirty-fourth session: run it from a checkout
# of 6811dcd): which part of the wide form's epilogue costs the tensor pipe's idle time
# at a tile's end (nothing stored saved 5-6% of Flash GEMM2 in call 2). Timing only, outputs
# wrong: -DMM_WIDE_ABLATE=2 nothing stored; 3 no proxy fence; 4 no wait for the previous
# copies nor its barrier; 5 no shared stores; and -DMM_WIDE_STAGING=0 (every tile from the
# registers, no boxes; correct). Flash 49152 rows, wide, x 2 in one call.
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
for v in 2 3 4 5; do lab_variant abl$v "-DMM_WIDE_ABLATE=$v"; done
lab_variant staging0 "-DMM_WIDE_STAGING=0"
lab_wait_variants || exit 1
echo "built $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
for i in 1 2; do
    for b in full abl2 abl3 abl4 abl5 staging0; do
        bin=build/$b/megamoe; [ $b = full ] && bin=build/megamoe
        lab_run 0 $b-$i $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 49152 --tile 192 --iters 20
    done
done
for f in $LAB_LOGS/*-[0-9].log; do
    printf '%-12s %s\n' "$(basename $f .log)" "$(grep -E '^gemm[12] ' $f | awk '{printf "%s %s us %s TF/s %s | ", $1, $9, $10, $13}')"
done | tee $OUT/epilogue.txt
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
