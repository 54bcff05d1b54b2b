# Session 36, call 5: the tool runs of gpu-check that touch the GEMM kernels, on the busy-pairs
# walk (ef60228's kernels): memcheck and racecheck of both tile forms on small ragged rows (where
# most pairs are left idle), the ring audit of both forms at Flash shapes, and the injected stall
# in pairs and in the wide form (must exit 4 naming the stage wait).
# One H200, carry [".deps"], ~4 min:  GIT_REV=<rev> bash results/h200-ep1/experiments/session36/run5.sh
set -u
. scripts/lab.sh
t0=$SECONDS
cj=(CJSON_HOME=$PWD/.deps/usr)
lab_build $OUT || exit 1
make -j8 "${cj[@]}" audit >$LAB_LOGS/build-audit.log 2>&1 &
make -j8 "${cj[@]}" inject >$LAB_LOGS/build-inject.log 2>&1 &
wait
[ -x build/audit/megamoe ] && [ -x build/inject/megamoe ] || { tail -20 $LAB_LOGS/build-*.log; exit 1; }
echo "built in $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
san="compute-sanitizer --report-api-errors no"
wide="gemm --config tests/configs/small-k512.json --ep 2 --rows 1,37,300 --spread skewed --tile 192 --iters 1 --warmup 0"
core="gemm --config tests/configs/small-n2048.json --ep 2 --rows 37,300 --spread skewed --tile 128 --iters 1 --warmup 0"
lab_run 0 memcheck-wide $mpi $san --tool memcheck --error-exitcode 9 build/megamoe $wide; grep -h "ERROR SUMMARY" $LAB_LOGS/memcheck-wide.log
lab_run 0 racecheck-wide $mpi $san --tool racecheck --error-exitcode 9 build/megamoe $wide; grep -h "RACECHECK SUMMARY" $LAB_LOGS/racecheck-wide.log
lab_run 0 memcheck-core $mpi $san --tool memcheck --error-exitcode 9 build/megamoe $core; grep -h "ERROR SUMMARY" $LAB_LOGS/memcheck-core.log
lab_run 0 racecheck-core $mpi $san --tool racecheck build/megamoe $core
echo "  racecheck-core: $(grep -h 'RACECHECK SUMMARY' $LAB_LOGS/racecheck-core.log); outside the known class: $(scripts/racecheck-unknown.sh $LAB_LOGS/racecheck-core.log)"
lab_run 0 audit-gemm $mpi build/audit/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,512,4096 --iters 3
lab_run 0 audit-gemm-wide $mpi build/audit/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,4096,12288 --tile 192 --iters 3
echo "  ring audit lines: $(cat $LAB_LOGS/audit-gemm*.log | grep -c 'ring audit')"
lab_run 4 stall-pairs $mpi build/inject/megamoe gemm --config tests/configs/small-n2048.json --ep 2 --rows 300 --iters 3
grep -h "timed out in gemm-pipeline" $LAB_LOGS/stall-pairs.log | head -2
lab_run 4 stall-wide $mpi build/inject/megamoe gemm --config tests/configs/small-k512.json --ep 2 --rows 300 --tile 192 --iters 3
grep -h "timed out in gemm-pipeline" $LAB_LOGS/stall-wide.log | head -2
tar czf $OUT/run5-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
