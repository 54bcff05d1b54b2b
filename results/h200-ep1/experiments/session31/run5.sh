# Thirty-first session, call 5 (one H200): the sanitizer and ring-audit runs of gpu-check's
# GPU_CHECK_TOOLS=only that cover what this session changed (the predicated stage release in the
# core and fused, the core's own prefix build), as far as the device time left allows: memcheck
# of the small scenarios, racecheck of smoke (every mode), fused on tokens-uneven and tokens-4096,
# the core's banded order (racecheck judged by scripts/racecheck-unknown.sh), the ring audit over
# every scenario and the GEMM core. The same commands as scripts/gpu-check.sh.
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
(make -j8 "${lab_cjson[@]}" GIT_REV=$GIT_REV audit > $LAB_LOGS/build-audit.log 2>&1; echo "audit build rc=$?") &
mpi="mpirun --bind-to none -np 1" B=build/megamoe
san="compute-sanitizer --error-exitcode 9 --report-api-errors no"
lab_run 0 memcheck $mpi $san --tool memcheck $B check --filter tokens- --modes fused,normal,ll --timeout-ms 60000
lab_run 0 racecheck $mpi $san --tool racecheck $B check --filter smoke --modes fused,normal,ll --timeout-ms 60000
lab_run 0 racecheck-fused $mpi $san --tool racecheck $B check --filter tokens-uneven --modes fused --timeout-ms 60000
lab_run 0 racecheck-dispatch $mpi $san --tool racecheck $B check --filter tokens-4096 --modes fused --timeout-ms 60000
lab_run 0 memcheck-band-128 $mpi $san --tool memcheck $B gemm --config tests/configs/small-n2048.json --ep 2 --rows 37,300 --spread skewed --tile 128 --iters 1 --warmup 0
lab_run 0 racecheck-band-128 $mpi compute-sanitizer --tool racecheck --report-api-errors no $B gemm --config tests/configs/small-n2048.json --ep 2 --rows 37,300 --spread skewed --tile 128 --iters 1 --warmup 0
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $LAB_LOGS/memcheck*.log $LAB_LOGS/racecheck*.log
echo "racecheck-band-128 outside the known class: $(scripts/racecheck-unknown.sh $LAB_LOGS/racecheck-band-128.log)"
wait
lab_run 0 audit-check $mpi build/audit/megamoe check --timeout-ms 60000
lab_run 0 audit-gemm $mpi build/audit/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,512,4096 --iters 3
grep -h "^check:" $LAB_LOGS/audit-check.log; echo "ring audit reports: $(cat $LAB_LOGS/audit-check.log $LAB_LOGS/audit-gemm.log | grep -c "ring audit")"
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
