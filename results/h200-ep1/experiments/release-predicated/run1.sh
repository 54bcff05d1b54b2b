# Prepared in the thirtieth session, not yet run: the stage release as predicated PTX
# (-DMM_RELEASE_PREDICATED=1) against the default, which branches around lane 0's arrivals in the
# core's 128 x 128 consume and in fused (the wide form got 2-4% when ptxas happened to predicate
# it). One H200, carry [".deps"]; ~8 min. Correctness of the new build first (a ring audit build
# would keep the branch: MM_RING_AUDIT takes the old path), then scripts/ab.sh: the GEMM core
# (decode and large rows, 128 x 128) and bench of every mode at EP1, sides alternating.
set -u
. scripts/lab.sh
t0=$SECONDS
flags=-DMM_RELEASE_PREDICATED=1
rp=$(basename "$(scripts/ab.sh new-dir "$flags")") # the folder ab.sh builds the new side in
lab_build $OUT || exit 1
lab_variant $rp "$flags"
lab_variant rpinject "$flags -DMM_INJECT_STALL_MS=12000"
lab_wait_variants || exit 1
echo "builds $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1" B=build/$rp/megamoe
F="--config configs/deepseek-v4-flash.json --ep 8"
N="--config tests/configs/small-n2048.json --ep 2"
for t in 128 192; do
  lab_run 0 t$t-tiny-skewed $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile $t --iters 3
  lab_run 0 t$t-k512-skewed $mpi $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile $t --iters 3
  lab_run 0 t$t-n2048-skewed $mpi $B gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --tile $t --iters 3
  lab_run 0 t$t-flash-skewed $mpi $B gemm $F --rows 8,37,512,3000,20000 --spread skewed --tile $t --iters 3
done
lab_run 0 memcheck $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm $N --rows 3,37,300,2000 --spread skewed --tile 128 --iters 1 --warmup 0
lab_run 4 stall-pairs $mpi build/rpinject/megamoe gemm $N --rows 2000 --tile 128 --iters 3
lab_run 4 stall-fused $mpi build/rpinject/megamoe check --filter smoke --modes fused --timeout-ms 60000
lab_run 0 check-np1 $mpi $B check
lab_ok_rows
grep -h "ERROR SUMMARY" $LAB_LOGS/memcheck.log; tail -3 $LAB_LOGS/check-np1.log
lab_pack $OUT
echo "tests $((SECONDS-t0)) s"
scripts/ab.sh run /tmp/ab-gemm --new-extra "$flags" --gemm 64,512,4096,49152 --tile 128 --configs deepseek-v4-flash,deepseek-v4-pro --rounds 3 --iters 20 --no-check
scripts/ab.sh run /tmp/ab-bench --new-extra "$flags" --configs deepseek-v4-flash --batches 1,8,64,512,4096 --modes fused,ll,normal --rounds 2 --iters 20 --no-check
cp /tmp/ab-gemm/ab.tgz $OUT/ab-gemm.tgz; cp /tmp/ab-bench/ab.tgz $OUT/ab-bench.tgz
cat /tmp/ab-gemm/summary.txt /tmp/ab-bench/summary.txt
echo "total $((SECONDS-t0)) s"
