# the final code's gpu-check (GPU_CHECK_TOOLS=0: the EP1 headline files) and the tool steps that
# touch the GEMM core (sanitizers on the banded order, ring audit and its break build, injected stall)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none"
t0=$SECONDS
GIT_REV=$(git rev-parse --short HEAD 2>/dev/null) GPU_CHECK_TOOLS=0 STEP_TIMEOUT=150 bash scripts/gpu-check.sh /tmp/g > $OUT/gpu-check.txt 2>&1
echo "gpu-check rc=$? $((SECONDS-t0)) s"; grep -v "rc=0" /tmp/g/summary.txt | head -20
(cd /tmp/g && tar czf $OUT/gpu-check-logs.tgz .)
r() { local want=$1 n=$2; shift 2; local t=$SECONDS; timeout 200 "$@" > /tmp/t/$n.log 2>&1; local rc=$?; printf '%-34s rc=%-3d want %d %4ds\n' $n $rc $want $((SECONDS-t)) | tee -a $OUT/tools.txt; }
mkdir -p /tmp/t
make -j16 $C audit audit-break inject > /tmp/t/build-tools.log 2>&1 || tail -5 /tmp/t/build-tools.log
echo "tool builds $((SECONDS-t0)) s"
N="--config tests/configs/small-n2048.json --ep 2"
for tool in memcheck racecheck; do
  for tile in 128 192; do
    r 0 sanitizer-$tool-gemm-band-$tile $mpi -np 1 compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no build/megamoe gemm $N --rows 37,300 --spread skewed --tile $tile --iters 1 --warmup 0
    grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" /tmp/t/sanitizer-$tool-gemm-band-$tile.log | tee -a $OUT/tools.txt
  done
done
F="--config configs/deepseek-v4-flash.json --ep 8"
r 0 audit-gemm $mpi -np 1 build/audit/megamoe gemm $F --rows 8,512,4096,20000 --spread skewed --iters 3
r 0 audit-gemm-wide $mpi -np 1 build/audit/megamoe gemm $F --rows 8,4096,12288 --tile 192 --iters 3
r 3 audit-break-gemm $mpi -np 1 build/audit-break/megamoe gemm $F --rows 4096 --iters 3
r 3 audit-break-gemm-wide $mpi -np 1 build/audit-break/megamoe gemm $F --rows 12288 --tile 192 --iters 3
for n in audit-gemm audit-gemm-wide audit-break-gemm audit-break-gemm-wide; do echo "$n: $(grep -c 'ring audit' /tmp/t/$n.log) ring-audit lines" | tee -a $OUT/tools.txt; done
r 0 audit-check $mpi -np 1 build/audit/megamoe check --timeout-ms 60000
echo "audit-check: $(grep -c 'ring audit' /tmp/t/audit-check.log) ring-audit lines; $(tail -1 /tmp/t/audit-check.log)" | tee -a $OUT/tools.txt
r 4 gemm-lab-stall-injected $mpi -np 1 build/inject/megamoe gemm --config configs/tiny.json --ep 2 --rows 37 --iters 3
r 4 gemm-lab-stall-injected-n2048 $mpi -np 1 build/inject/megamoe gemm $N --rows 300 --iters 3
r 4 gemm-stall-injected $mpi -np 1 build/inject/megamoe check --filter smoke --modes ll --timeout-ms 60000
grep -h "timed out" /tmp/t/*stall*.log | tee -a $OUT/tools.txt
(cd /tmp/t && tar czf $OUT/tools-logs.tgz --exclude=build-tools.log .)
echo "total $((SECONDS-t0)) s"
