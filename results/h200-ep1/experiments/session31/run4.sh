# Thirty-first session, call 4 (one H200): the row-tile prefix built inside the 128 x 128 GEMM
# kernel (no tile_prefix_kernel launch up to 1024 experts; the last CTA zeroes the claim counter).
# (1) correctness: ragged and empty experts on both prefix paths (1024 experts in-kernel, 2048 by
# the prefix kernel), both scale paths, check of every mode (the activation kernel reads the
# prefix CTA 0 wrote), memcheck, racecheck, injected stalls; (2) gpu-check GPU_CHECK_TOOLS=0
# (the headline gemm files); (3) A/B against -DGEMM_OWN_PREFIX_MAX=0 (the prefix kernel for
# every launch: the old path) with the side first alternating. Logs outside $OUT, archives back.
set -u
. scripts/lab.sh
t0=$SECONDS
old=$(basename "$(scripts/ab.sh new-dir -DGEMM_OWN_PREFIX_MAX=0)")
lab_build $OUT || exit 1
lab_variant $old -DGEMM_OWN_PREFIX_MAX=0
lab_variant pfinject -DMM_INJECT_STALL_MS=12000
lab_wait_variants || exit 1
echo "builds $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1" B=build/megamoe
F="--config configs/deepseek-v4-flash.json --ep 8"
N="--config tests/configs/small-n2048.json --ep 2"
lab_run 0 tiny-skewed $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile 128 --iters 3
lab_run 0 k512-skewed $mpi $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile 128 --iters 3
lab_run 0 n2048-skewed $mpi $B gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --tile 128 --iters 3
lab_run 0 flash-skewed $mpi $B gemm $F --rows 8,37,512,3000,20000 --spread skewed --tile 128 --iters 3
lab_run 0 flash-routing $mpi $B gemm $F --rows 8,512,4096 --spread routing --tile 128 --iters 3
lab_run 0 prefix-1024 $mpi $B gemm --config tests/configs/many-experts.json --ep 1 --rows 1,37,300,2000,9000 --spread skewed --iters 3
lab_run 0 prefix-512 $mpi $B gemm --config tests/configs/many-experts.json --ep 2 --rows 1,37,300,2000,9000 --spread skewed --iters 3
lab_run 0 prefix-2048 $mpi $B gemm --config tests/configs/prefix-2048.json --ep 1 --rows 1,37,300,2000,9000 --spread skewed --iters 3
lab_run 0 memcheck $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm $N --rows 3,37,300,2000 --spread skewed --tile 128 --iters 1 --warmup 0
lab_run 0 racecheck $mpi compute-sanitizer --tool racecheck --report-api-errors no $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,37,300 --spread skewed --tile 128 --iters 1 --warmup 0
lab_run 4 stall-pairs $mpi build/pfinject/megamoe gemm $N --rows 2000 --tile 128 --iters 3
lab_run 4 stall-claims $mpi build/pfinject/megamoe gemm $N --rows 37 --tile 128 --iters 3
lab_ok_rows
grep -h "ERROR SUMMARY" $LAB_LOGS/memcheck.log; grep -h "RACECHECK SUMMARY" $LAB_LOGS/racecheck.log
echo "racecheck outside the known class: $(scripts/racecheck-unknown.sh $LAB_LOGS/racecheck.log)"
lab_pack $OUT
echo "tests $((SECONDS-t0)) s"
GPU_CHECK_TOOLS=0 bash scripts/gpu-check.sh /tmp/gc > /tmp/gc-summary.txt 2>&1
echo "gpu-check rc=$? $((SECONDS-t0)) s"
cp /tmp/gc/gpu-check-logs.tgz $OUT/; grep -v "rc=0 " /tmp/gc-summary.txt | tail -8
grep -h "^check:" /tmp/gc/check-np1.log
scripts/ab.sh run /tmp/ab-gemm --new-extra -DGEMM_OWN_PREFIX_MAX=0 --gemm 8,64,512,4096 --tile 128 --configs deepseek-v4-flash,deepseek-v4-pro --rounds 3 --iters 30 --no-check > /tmp/ab-gemm.log 2>&1
cp /tmp/ab-gemm/ab.tgz $OUT/ab-gemm.tgz; grep -v "^gate" /tmp/ab-gemm.log | tail -14
echo "ab gemm $((SECONDS-t0)) s"
scripts/ab.sh run /tmp/ab-bench --new-extra -DGEMM_OWN_PREFIX_MAX=0 --configs deepseek-v4-flash --batches 1,8,64,512 --modes ll,normal --rounds 2 --iters 20 --no-check > /tmp/ab-bench.log 2>&1
cp /tmp/ab-bench/ab.tgz $OUT/ab-bench.tgz; grep -v "^gate" /tmp/ab-bench.log | tail -6
echo "total $((SECONDS-t0)) s"
