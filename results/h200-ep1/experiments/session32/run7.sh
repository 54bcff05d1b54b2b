# Thirty-second session, call 7 (one H200): narrow2 (a narrow last tile's items on two column
# tiles each) against the wide form before it (build/ab-old): correctness of the wide form over
# ragged experts with narrow tiles where col_tiles % 4 == 0 (small-k512, small-n2048, small-h640
# whose K / 128 = 5 takes the per-block scale path, Pro and Flash), memcheck, then Pro and Flash
# at 49152 rows x 3, sides alternating. carry [".deps", "build/ab-old"].
set -u
. scripts/lab.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$SECONDS
[ -f build/ab-old/Makefile ] || { echo "build/ab-old not carried"; exit 1; }
(cd build/ab-old && make -j8 "${lab_cjson[@]}" > $LAB_LOGS/build-old.log 2>&1) &
lab_build $OUT || exit 1
wait
echo "builds $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1" B=build/megamoe
lab_run 0 k512-wide $mpi $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,37,64,65,300,2000 --spread skewed --tile 192 --iters 3
lab_run 0 n2048-wide $mpi $B gemm --config tests/configs/small-n2048.json --ep 2 --rows 37,300,2000,9000 --spread skewed --tile 192 --iters 3
lab_run 0 h640-wide $mpi $B gemm --config tests/configs/small-h640.json --ep 2 --rows 37,300,2000 --spread skewed --tile 192 --iters 3
lab_run 0 pro-wide $mpi $B gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 3000,49152 --tile 192 --iters 3
lab_run 0 flash-wide $mpi $B gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 3000,20000 --spread skewed --tile 192 --iters 3
lab_run 0 memcheck-wide $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm --config tests/configs/small-n2048.json --ep 2 --rows 37,300 --spread skewed --tile 192 --iters 1 --warmup 0
lab_ok_rows
grep -h "ERROR SUMMARY" $LAB_LOGS/memcheck-wide.log
lab_pack $OUT
echo "tests $((SECONDS-t0)) s"
scripts/ab.sh run /tmp/ab --gemm 49152 --tile 192 --configs deepseek-v4-pro,deepseek-v4-flash --rounds 3 --iters 10 --no-check > /tmp/ab.log 2>&1
grep "^gemm\|^ab:" /tmp/ab.log; cp /tmp/ab/ab.tgz $OUT/
echo "total $((SECONDS-t0)) s"
