# Run in the thirty-third session (results/h200-ep1/experiments/session33/call1): correct, Pro
# GEMM1 49152 -5.6 to -6.3%; the patch is in main since then (d73eb7c), so `git apply` no longer
# applies; the script itself still runs the A/B on main.
# narrow2, prepared in the thirty-second session and NOT yet run correctly on a GPU: a narrow
# last tile's items (at most 64 rows) on two column tiles each in the wide form (narrow2.patch:
# mm_wide_units / mm_wide_locate in gemm_schedule.h with a CPU test that checks the old order
# item for item with narrow2 off and exact cover with it on; the units prefix in tile_prefix.cuh;
# the producer's second weight block in the A area; wide_two_consume; tests/configs/small-h640.json
# for the per-block scale path). Why: call 6 of that session measured a narrow 64-row tile at
# ~0.9 of a 192-row tile's cost (Pro 1024 / 1088 / 1152 rows an expert); prediction in
# docs/perf-notes.md (thirty-second session): Pro GEMM1 at 49152 rows 5-7% faster, or nothing if
# the L2 -> SM bytes bound the narrow tiles. Its first GPU run (session32/call7, 1f8a858) failed
# every row past 1: the block prefix still divided by `bm`, a units kind (-2) for the wide form;
# the patch has the fix (7f84621; rebased onto 411c283, whose mm_tiles_of it calls), which the
# session had no device time left to run.
# To run: `git apply results/h200-ep1/experiments/narrow2/narrow2.patch`, `make test`, commit,
# then on one H200 with carry [".deps"]: `GIT_REV=<rev> bash results/h200-ep1/experiments/
# narrow2/run1.sh` (~3 min: checks of the wide form on ragged experts, memcheck, then Pro 49152
# x 2 with narrow2 against -DMM_WIDE_NARROW2=0). If it wins: gpu-check both halves, then land.
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
