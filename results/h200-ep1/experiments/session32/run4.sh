# Thirty-second session, call 4 (one H200): the tool checks of e42cc42's GEMM core (the claims
# without a first atomic or an end count, the in-kernel prefix, the block-wide prefix kernel)
# that call 3's gpu-check (GPU_CHECK_TOOLS=0) left out: racecheck of the decode and banded
# forms, the ring audit over check and the core, injected stalls and a fault in ll's GEMM; then
# decode at 1-16 rows an expert x 3 and the 49152-row rows x 3 (the headline file has one run).
set -u
. scripts/lab.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$SECONDS
lab_build $OUT || exit 1
for t in audit inject fault; do make -j6 "${lab_cjson[@]}" GIT_REV="$GIT_REV" $t > $LAB_LOGS/build-$t.log 2>&1 & done; wait
ls build/audit/megamoe build/inject/megamoe build/fault/megamoe || exit 1
echo "builds $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1" B=build/megamoe
lab_run 0 racecheck-decode $mpi compute-sanitizer --tool racecheck --report-api-errors no $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,37,300 --spread skewed --tile 128 --iters 2 --warmup 0
lab_run 0 racecheck-band-128 $mpi compute-sanitizer --tool racecheck --report-api-errors no $B gemm --config tests/configs/small-n2048.json --ep 2 --rows 37,300 --spread skewed --tile 128 --iters 1 --warmup 0
lab_run 0 audit-check $mpi build/audit/megamoe check --timeout-ms 60000
lab_run 0 audit-gemm $mpi build/audit/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,32,512,4096 --iters 3
lab_run 4 gemm-stall-injected $mpi build/inject/megamoe check --filter smoke --modes ll --timeout-ms 60000
lab_run 4 gemm-lab-stall-injected $mpi build/inject/megamoe gemm --config configs/tiny.json --ep 2 --rows 37 --iters 3
lab_run 3 gemm-fault-injected $mpi build/fault/megamoe bench --config configs/tiny.json --modes ll --batches 4 --timeout-ms 20000
for f in racecheck-decode racecheck-band-128; do echo "$f: $(grep -h 'RACECHECK SUMMARY' $LAB_LOGS/$f.log); outside the known class: $(scripts/racecheck-unknown.sh $LAB_LOGS/$f.log)"; done
for f in audit-check audit-gemm; do echo "$f: ring audit reports $(grep -c 'ring audit' $LAB_LOGS/$f.log)"; done
grep -h "^check:" $LAB_LOGS/audit-check.log
grep -h "gemm-pipeline: CTA [0-9]*'s stage full" $LAB_LOGS/gemm-stall-injected.log $LAB_LOGS/gemm-lab-stall-injected.log | head -2
grep -h "cudaErrorIllegalAddress" $LAB_LOGS/gemm-fault-injected.log | head -1
lab_ok_rows
echo "tests $((SECONDS-t0)) s"
for i in 1 2 3; do
  for m in flash pro; do
    $mpi $B gemm --config configs/deepseek-v4-$m.json --ep 8 --rows 32,64,128,256,512 --iters 20 2>&1 | grep -E "^gemm[12] " | sed "s/^/$m $i /"
  done
done > $LAB_LOGS/decode-x3.txt
awk '{print $1,$2,$3,$4,$11,$13}' $LAB_LOGS/decode-x3.txt
for i in 1 2 3; do
  for m in pro flash; do
    $mpi $B gemm --config configs/deepseek-v4-$m.json --ep 8 --rows 49152 --iters 10 2>&1 | grep -E "^gemm[12] " | sed "s/^/$m $i /"
  done
done > $LAB_LOGS/big-x3.txt
awk '{print $1,$2,$3,$4,$11,$12,$18}' $LAB_LOGS/big-x3.txt
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
