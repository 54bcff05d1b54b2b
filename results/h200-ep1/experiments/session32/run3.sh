# Thirty-second session, call 3 (one H200): the claims without a first atomic or an end count
# (gemm_claim_next: atom.inc wrapping at the launch's last claim) against 76406cc (the in-kernel
# prefix, build/ab-old): correctness across many launches of one process (the counter must come
# back to zero after each), then the decode A/B, then gpu-check GPU_CHECK_TOOLS=0 of this build
# (its gemm steps write the headline gemm files; its bench steps EP1's), last so a time-out cuts
# only it. carry [".deps", "build/ab-old"].
set -u
. scripts/lab.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$SECONDS
[ -f build/ab-old/Makefile ] || { echo "build/ab-old not carried"; exit 1; }
lab_build $OUT || exit 1
lab_variant cinject -DMM_INJECT_STALL_MS=12000
lab_wait_variants || exit 1
echo "builds $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1" B=build/megamoe
N="--config tests/configs/small-n2048.json --ep 2"
lab_run 0 tiny-skewed $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile 128 --iters 5
lab_run 0 flash-skewed $mpi $B gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,37,512,3000,20000 --spread skewed --tile 128 --iters 5
lab_run 0 flash-uniform $mpi $B gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,64,512,4096 --iters 5
lab_run 0 prefix-1024 $mpi $B gemm --config tests/configs/many-experts.json --ep 1 --rows 1,37,300,2000,9000 --spread skewed --iters 3
lab_run 0 prefix-2048 $mpi $B gemm --config tests/configs/prefix-2048.json --ep 1 --rows 1,37,300,2000,9000 --spread skewed --iters 3
lab_run 0 memcheck $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm $N --rows 3,37,300,2000 --spread skewed --tile 128 --iters 2 --warmup 1
lab_run 4 stall-claims $mpi build/cinject/megamoe gemm $N --rows 37 --tile 128 --iters 3
lab_run 0 check-np1 $mpi $B check
lab_ok_rows; grep -h "^check:" $LAB_LOGS/check-np1.log
grep -h "ERROR SUMMARY" $LAB_LOGS/memcheck.log
lab_pack $OUT
echo "tests $((SECONDS-t0)) s"
scripts/ab.sh run /tmp/ab --gemm 8,64,512,4096 --tile 128 --configs deepseek-v4-flash,deepseek-v4-pro --rounds 3 --iters 20 --no-check > /tmp/ab.log 2>&1
grep "^gemm\|^ab:" /tmp/ab.log; cp /tmp/ab/ab.tgz $OUT/
echo "ab $((SECONDS-t0)) s"
GIT_REV=$GIT_REV GPU_CHECK_TOOLS=0 bash scripts/gpu-check.sh /tmp/gc > /tmp/gc-summary.txt 2>&1
echo "gpu-check rc=$? $((SECONDS-t0)) s"
cp /tmp/gc/gpu-check-logs.tgz /tmp/gc-summary.txt $OUT/
grep -E "FAIL|fail" /tmp/gc-summary.txt | head; tail -3 /tmp/gc-summary.txt
echo "total $((SECONDS-t0)) s"
