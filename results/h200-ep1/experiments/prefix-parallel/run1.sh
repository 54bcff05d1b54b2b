# Prepared in the thirty-first session, not yet run: the row-tile prefix on a whole thread block
# (prefix-parallel.patch: kernels/tile_prefix.cuh mm_block_tile_prefix, chunks of the experts a
# thread by mm_prefix_chunk (CPU-tested), a warp scan) in tile_prefix_kernel (128 threads) and in
# normal's offsets kernel (256 threads; its padded segments are the tiles times 128), against
# their one-thread forms (-DMM_PREFIX_SERIAL, the current code). The GEMM kernels' SASS and every
# other normal kernel's are unchanged (checked function by function). Why: in the thirty-first
# session's call 4, leaving the prefix kernel out made normal 169 -> 139 and ll 142 -> 115 us at
# EP1 Flash 1 token (256 local experts: thread 0's walk, ~12-14 us a GEMM) and a decode GEMM call
# at EP8 2-3.5 us faster. Prediction: EP1 Flash ll / normal at 1-8 tokens 20-28 us faster (normal
# a few us more from its offsets kernel), fused unchanged; EP8 decode gemm 1-2 us.
# To run: `git apply results/h200-ep1/experiments/prefix-parallel/prefix-parallel.patch`, commit,
# then on one H200 with carry [".deps"]: `GIT_REV=<rev> bash results/h200-ep1/experiments/
# prefix-parallel/run1.sh` (~4 min). Then gpu-check (both halves) before landing, and EP2's bench
# again when lent (the README's EP2 small-batch speedups carry this overhead).
set -u
. scripts/lab.sh
t0=$SECONDS
flags=-DMM_PREFIX_SERIAL
serial=$(basename "$(scripts/ab.sh new-dir "$flags")")
lab_build $OUT || exit 1
lab_variant $serial "$flags"
lab_wait_variants || exit 1
echo "builds $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1" B=build/megamoe
F="--config configs/deepseek-v4-flash.json --ep 8"
for t in 128 192; do
  lab_run 0 t$t-tiny-skewed $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile $t --iters 3
  lab_run 0 t$t-flash-skewed $mpi $B gemm $F --rows 8,37,512,3000,20000 --spread skewed --tile $t --iters 3
done
lab_run 0 prefix-1024 $mpi $B gemm --config tests/configs/many-experts.json --ep 1 --rows 1,37,300,2000,9000 --spread skewed --iters 3
lab_run 0 prefix-2048 $mpi $B gemm --config tests/configs/prefix-2048.json --ep 1 --rows 1,37,300,2000,9000 --spread skewed --iters 3
lab_run 0 prefix-2048-wide $mpi $B gemm --config tests/configs/prefix-2048.json --ep 1 --rows 2000,9000 --spread skewed --tile 192 --iters 3
lab_run 0 memcheck $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm --config tests/configs/prefix-2048.json --ep 1 --rows 37,300 --spread skewed --iters 1 --warmup 0
lab_run 0 check-np1 $mpi $B check
lab_ok_rows
grep -h "ERROR SUMMARY" $LAB_LOGS/memcheck.log; grep -h "^check:" $LAB_LOGS/check-np1.log
lab_pack $OUT
echo "tests $((SECONDS-t0)) s"
scripts/ab.sh run /tmp/ab-gemm --new-extra "$flags" --gemm 8,64,512 --tile 128 --configs deepseek-v4-flash,deepseek-v4-pro --rounds 3 --iters 30 --no-check > /tmp/ab-gemm.log 2>&1
grep "^gemm" /tmp/ab-gemm.log
scripts/ab.sh run /tmp/ab-bench --new-extra "$flags" --configs deepseek-v4-flash --batches 1,8,64,512 --modes fused,ll,normal --rounds 2 --iters 20 --no-check > /tmp/ab-bench.log 2>&1
grep "^bench" /tmp/ab-bench.log
cp /tmp/ab-gemm/ab.tgz $OUT/ab-gemm.tgz; cp /tmp/ab-bench/ab.tgz $OUT/ab-bench.tgz
echo "total $((SECONDS-t0)) s"
