# Prepared in the thirtieth session, not yet run: the wide form's mid tiles (-DMM_WIDE_MID=1): an
# expert's last 192 + <= 64 rows as two tiles of 96..128 rows (mm_wide_tile_span, CPU-tested)
# instead of a full tile and a narrow one, and any tile of 65..128 rows loaded as 2 x 64 A rows
# (16 KB a block, not 24). Prediction: Pro at 1024 rows an expert (4 x 192 + 128 + 128 against
# 5 x 192 + 64): a mid tile costs ~0.8 of a full one by its bytes, the narrow one measured
# 0.67-0.74, so 5.7 -> 5.6 full-tile units an expert column pair: 0 to -2% on Pro GEMM1 / GEMM2
# at 49152 rows; Flash's 1536 rows (8 x 192) unchanged (a control). One H200, carry [".deps"];
# ~8 min. Correctness of the new build first, then scripts/ab.sh --gemm (sides alternating).
set -u
. scripts/lab.sh
t0=$SECONDS
flags=-DMM_WIDE_MID=1
mid=$(basename "$(scripts/ab.sh new-dir "$flags")") # the folder ab.sh builds the new side in
lab_build $OUT || exit 1
lab_variant $mid "$flags"
lab_variant midaudit "$flags -DMM_RING_AUDIT"
lab_variant midinject "$flags -DMM_INJECT_STALL_MS=12000"
lab_wait_variants || exit 1
echo "builds $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1" B=build/$mid/megamoe
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
N="--config tests/configs/small-n2048.json --ep 2"
# row counts with rests of 1..64 (split pairs), 65..128 (mid last tiles) and full tiles, both scale paths
lab_run 0 tiny-skewed $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,65,129,193,257,300,450,2000,9000 --spread skewed --tile 192 --iters 3
lab_run 0 k512-skewed $mpi $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,65,193,257,300,2000,9000 --spread skewed --tile 192 --iters 3
lab_run 0 n2048-skewed $mpi $B gemm $N --rows 37,193,300,2000,5000,20000 --spread skewed --tile 192 --iters 3
lab_run 0 flash-skewed $mpi $B gemm $F --rows 3000,20000,49152 --spread skewed --tile 192 --iters 3
lab_run 0 flash-routing $mpi $B gemm $F --rows 49152 --spread routing --tile 192 --iters 3
lab_run 0 pro-uniform $mpi $B gemm $P --rows 46080,49152 --tile 192 --iters 3
lab_run 0 memcheck $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm $N --rows 193,300,2000 --spread skewed --tile 192 --iters 1 --warmup 0
lab_run 0 racecheck $mpi compute-sanitizer --tool racecheck --report-api-errors no $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,193,300 --spread skewed --tile 192 --iters 1 --warmup 0
lab_run 0 audit $mpi build/midaudit/megamoe gemm $N --rows 193,300,2000 --spread skewed --tile 192 --iters 3
lab_run 4 stall $mpi build/midinject/megamoe gemm --config tests/configs/small-k512.json --ep 2 --rows 300 --tile 192 --iters 3
lab_ok_rows
grep -h "ERROR SUMMARY" $LAB_LOGS/memcheck.log; grep -h "RACECHECK SUMMARY" $LAB_LOGS/racecheck.log
echo "racecheck outside the known class: $(scripts/racecheck-unknown.sh $LAB_LOGS/racecheck.log)"
grep -h "timed out" $LAB_LOGS/stall.log | head -1
lab_pack $OUT
echo "tests $((SECONDS-t0)) s"
scripts/ab.sh run /tmp/ab --new-extra "$flags" --gemm 12288,46080,49152 --tile 192 --configs deepseek-v4-pro,deepseek-v4-flash --rounds 3 --iters 10 --no-check
cp /tmp/ab/ab.tgz $OUT/ && cat /tmp/ab/summary.txt
echo "total $((SECONDS-t0)) s"
