# Thirty-second session, call 8 (one H200, the session's last device minutes): narrow2 again after
# call 7's failure (tile_prefix.cuh's block prefix still divided by `bm`, which is a units kind
# for the wide form: a negative item count, nothing computed past 1 row). Checks of the wide form
# over ragged experts with narrow tiles, then Pro 49152 x 2 with narrow2 on (this build) against
# off (-DMM_WIDE_NARROW2=0: the old item space), sides alternating. carry [".deps"].
set -u
. scripts/lab.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$SECONDS
flags=-DMM_WIDE_NARROW2=0
off=$(basename "$(scripts/ab.sh new-dir "$flags")")
lab_build $OUT || exit 1
lab_variant $off "$flags"
mpi="mpirun --bind-to none -np 1" B=build/megamoe
lab_run 0 k512-wide $mpi $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,37,64,65,300,2000 --spread skewed --tile 192 --iters 3
lab_run 0 n2048-wide $mpi $B gemm --config tests/configs/small-n2048.json --ep 2 --rows 37,300,2000,9000 --spread skewed --tile 192 --iters 3
lab_run 0 h640-wide $mpi $B gemm --config tests/configs/small-h640.json --ep 2 --rows 37,300,2000 --spread skewed --tile 192 --iters 3
lab_run 0 flash-wide $mpi $B gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 3000,20000 --spread skewed --tile 192 --iters 3
lab_run 0 memcheck-wide $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm --config tests/configs/small-n2048.json --ep 2 --rows 37,300 --spread skewed --tile 192 --iters 1 --warmup 0
lab_ok_rows
grep -h "ERROR SUMMARY" $LAB_LOGS/memcheck-wide.log
lab_pack $OUT
echo "tests $((SECONDS-t0)) s"
lab_wait_variants || exit 1
scripts/ab.sh run /tmp/ab --new-extra "$flags" --gemm 49152 --tile 192 --configs deepseek-v4-pro --rounds 2 --iters 10 > /tmp/ab.log 2>&1
grep "^gemm\|^ab:" /tmp/ab.log; cp /tmp/ab/ab.tgz $OUT/
echo "total $((SECONDS-t0)) s"
