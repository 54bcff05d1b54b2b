# gpu-check's tool steps that touch the GEMM core, for a revision whose GPU_CHECK_TOOLS=0 run passed
# in the call before (fused's SASS is unchanged; the core's instructions too)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none"
r() { local want=$1 n=$2; shift 2; local t0=$SECONDS; timeout 200 "$@" > $OUT/$n.log 2>&1; local rc=$?; printf '%-32s rc=%-3d want %d %4ds\n' $n $rc $want $((SECONDS-t0)); }
make -j16 $C > $OUT/build.log 2>&1 || { tail $OUT/build.log; exit 1; }
(make -j16 $C audit audit-break > $OUT/build-audit.log 2>&1; make -j16 $C inject > $OUT/build-inject.log 2>&1) &
for tool in memcheck racecheck; do
  r 0 sanitizer-$tool-gemm-wide $mpi -np 1 compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no build/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,37,300 --spread skewed --tile 192 --iters 1 --warmup 0
  grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $OUT/sanitizer-$tool-gemm-wide.log
done
wait
r 0 audit-gemm $mpi -np 1 build/audit/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,512,4096 --iters 3
r 0 audit-gemm-wide $mpi -np 1 build/audit/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,4096,12288 --tile 192 --iters 3
r 3 audit-break-gemm $mpi -np 1 build/audit-break/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 4096 --iters 3
r 3 audit-break-gemm-wide $mpi -np 1 build/audit-break/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288 --tile 192 --iters 3
for n in audit-gemm audit-gemm-wide audit-break-gemm audit-break-gemm-wide; do echo "$n: $(grep -c 'ring audit' $OUT/$n.log) ring-audit lines; $(grep -E '^gemm[12] ' $OUT/$n.log | awk '{print $6, $13}' | tr '\n' ' ')"; done
r 4 gemm-stall-injected $mpi -np 1 build/inject/megamoe check --filter smoke --modes ll --timeout-ms 60000
r 4 gemm-lab-stall-injected $mpi -np 1 build/inject/megamoe gemm --config configs/tiny.json --ep 2 --rows 37 --iters 3
r 4 gemm-lab-stall-injected-wide $mpi -np 1 build/inject/megamoe gemm --config configs/tiny.json --ep 2 --rows 300 --tile 192 --iters 3
grep -h "timed out" $OUT/gemm-stall-injected.log $OUT/gemm-lab-stall-injected.log $OUT/gemm-lab-stall-injected-wide.log
