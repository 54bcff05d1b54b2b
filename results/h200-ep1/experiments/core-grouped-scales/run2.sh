# the core's 128 x 128 tiles with their scales 4 K blocks at a time (MM_GEMM_GROUP_SCALES, default 1)
# against per block (0), x 2 rounds alternating; correctness (ragged, mixed gathered and TMA tiles,
# memcheck, racecheck, ring audit, injected stall, check at EP1)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
echo "main build $((SECONDS-t0)) s"
mkdir -p build/ng && cp -a build/src build/kernels build/ng/ && rm -f build/ng/kernels/gemm.o build/ng/megamoe
make $C BUILD=build/ng NVEXTRA=-DMM_GEMM_GROUP_SCALES=0 build/ng/megamoe > $OUT/build-ng.log 2>&1 &
(make -j12 $C audit audit-break > $OUT/build-audit.log 2>&1; make -j12 $C inject > $OUT/build-inject.log 2>&1) &
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
K="--config tests/configs/small-k512.json --ep 2"
r() { local n=$1; shift; local t=$SECONDS; timeout 150 "$@" > $OUT/$n.log 2>&1; echo "$n rc=$? $((SECONDS-t)) s"; }
r ragged $mpi build/megamoe gemm $F --rows 37,3000,20000 --spread skewed --tile 128 --iters 3
r ragged-pro $mpi build/megamoe gemm $P --rows 4096,30000 --spread routing --iters 3
r ragged-k512 $mpi build/megamoe gemm $K --rows 1,3,37,129,300,2000 --spread skewed --tile 128 --iters 3
r ragged-tiny $mpi build/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,3,37,129,300 --spread skewed --iters 3
for tool in memcheck racecheck; do
  r $tool-k512 $mpi compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no build/megamoe gemm $K --rows 1,37,300 --spread skewed --tile 128 --iters 1 --warmup 0
  grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $OUT/$tool-k512.log
done
cat $OUT/ragged*.log | grep -E "^gemm[12] " > $OUT/ragged.txt
grep -c " OK " $OUT/ragged.txt; grep -v " OK " $OUT/ragged.txt | head
r check $mpi build/megamoe check --json $OUT/check-ep1.json
tail -2 $OUT/check.log
wait
echo "builds done $((SECONDS-t0)) s"
r audit-gemm $mpi build/audit/megamoe gemm $F --rows 8,512,4096,12288 --tile 128 --iters 3
r audit-gemm-k512 $mpi build/audit/megamoe gemm $K --rows 37,300,2000 --spread skewed --tile 128 --iters 3
r audit-break-gemm $mpi build/audit-break/megamoe gemm $F --rows 4096 --tile 128 --iters 3
for n in audit-gemm audit-gemm-k512 audit-break-gemm; do echo "$n: $(grep -c 'ring audit' $OUT/$n.log) ring-audit lines"; done
r stall-k512 $mpi build/inject/megamoe gemm $K --rows 300 --tile 128 --iters 3
grep -h "timed out" $OUT/stall-k512.log
{
for round in 1 2; do
  for b in grouped perblock; do
    bin=build/megamoe; [ $b = perblock ] && bin=build/ng/megamoe
    t=$SECONDS
    echo "== round $round $b flash 128"; timeout 100 $mpi $bin gemm $F --rows 4096,12288,49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b pro"; timeout 100 $mpi $bin gemm $P --rows 4096,49152 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "   ($((SECONDS-t)) s)"
  done
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
echo "total $((SECONDS-t0)) s"
