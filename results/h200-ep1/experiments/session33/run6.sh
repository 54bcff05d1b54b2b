# Session 33, call 6: decode weight streaming of the final code, x 3 in one call (1, 2, 4, 8 and
# 16 rows an expert at EP8: Flash 32 experts, Pro 48), the 128 x 128 core whose SASS is
# e42cc42's (thirty-second session: 3.34-3.45 TB/s Flash GEMM2 on one machine; this session's
# headline file, a single run, 3.18 at 2 rows an expert).
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
mpi="mpirun --bind-to none -np 1"
for i in 1 2 3; do
    lab_run 0 flash-decode-$i $mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 32,64,128,256,512 --iters 30
    lab_run 0 pro-decode-$i $mpi build/megamoe gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 48,96,192,384,768 --iters 30
done
for f in $LAB_LOGS/*-decode-[0-9].log; do
    printf '%-16s %s\n' "$(basename $f .log)" "$(grep -E '^gemm[12] ' $f | awk '{printf "%s/%s %s us %s GB/s %s | ", $1, $2, $9, $11, $13}')"
done | tee $OUT/decode-x3.txt
lab_ok_rows
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
