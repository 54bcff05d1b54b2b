# (prepared in the twenty-seventh session, not yet run) chained tiles, MM_GEMM_CHAIN=1 (both GEMM
# forms: the next large tile's first block issued before this tile's rows are stored) against the
# default, x 3 rounds alternating; correctness of the chained build first (ragged rows in both
# forms, memcheck, racecheck judged, ring audit and its break, injected stalls, check of every mode)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
mkdir -p build/ch && cp -a build/src build/kernels build/ch/ && rm -f build/ch/kernels/gemm.o build/ch/megamoe
make $C BUILD=build/ch NVEXTRA=-DMM_GEMM_CHAIN=1 build/ch/megamoe > $OUT/build-ch.log 2>&1 || { tail -20 $OUT/build-ch.log; exit 1; }
(make -j12 $C BUILD=build/ch-audit NVEXTRA="-DMM_GEMM_CHAIN=1 -DMM_RING_AUDIT" build/ch-audit/megamoe > $OUT/build-ch-audit.log 2>&1;
 make -j12 $C BUILD=build/ch-break NVEXTRA="-DMM_GEMM_CHAIN=1 -DMM_RING_AUDIT -DMM_RING_AUDIT_BREAK" build/ch-break/megamoe > $OUT/build-ch-break.log 2>&1;
 make -j12 $C BUILD=build/ch-inject NVEXTRA="-DMM_GEMM_CHAIN=1 -DMM_INJECT_STALL_MS=12000" build/ch-inject/megamoe > $OUT/build-ch-inject.log 2>&1) &
echo "builds $((SECONDS-t0)) s"
r() { local want=$1 n=$2; shift 2; local t=$SECONDS; timeout 150 "$@" > /tmp/c-$n.log 2>&1; local rc=$?; printf '%-30s rc=%-3d want %d %4ds\n' $n $rc $want $((SECONDS-t)) | tee -a $OUT/steps.txt; }
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
N="--config tests/configs/small-n2048.json --ep 2"
for tile in 128 192; do
  r 0 ragged-n2048-$tile $mpi build/ch/megamoe gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --tile $tile --iters 3
  r 0 ragged-flash-$tile $mpi build/ch/megamoe gemm $F --rows 37,3000,20000 --spread skewed --tile $tile --iters 3
  r 0 memcheck-n2048-$tile $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no build/ch/megamoe gemm $N --rows 37,300 --spread skewed --tile $tile --iters 1 --warmup 0
  r 0 racecheck-n2048-$tile $mpi compute-sanitizer --tool racecheck --report-api-errors no build/ch/megamoe gemm $N --rows 37,300 --spread skewed --tile $tile --iters 1 --warmup 0
  echo "racecheck-n2048-$tile outside the known class: $(scripts/racecheck-unknown.sh /tmp/c-racecheck-n2048-$tile.log)" | tee -a $OUT/steps.txt
done
grep -hE "^gemm[12] " /tmp/c-ragged-*.log | grep -c " OK " | sed 's/^/ragged OK rows: /' | tee -a $OUT/steps.txt
grep -hE "^gemm[12] " /tmp/c-ragged-*.log | grep -v " OK " | head -5
r 0 check-ch $mpi build/ch/megamoe check --timeout-ms 60000
tail -1 /tmp/c-check-ch.log | tee -a $OUT/steps.txt
wait # the test builds, before the timed rounds
echo "test builds $((SECONDS-t0)) s"
{
for round in 1 2 3; do
  for b in default chain; do
    bin=build/megamoe; [ $b = chain ] && bin=build/ch/megamoe
    echo "== round $round $b flash"; timeout 100 $mpi $bin gemm $F --rows 4096,12288,49152 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b flash 128"; timeout 100 $mpi $bin gemm $F --rows 49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b pro"; timeout 100 $mpi $bin gemm $P --rows 4096,49152 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
r 0 audit-gemm $mpi build/ch-audit/megamoe gemm $F --rows 8,512,4096,20000 --spread skewed --iters 3
r 0 audit-gemm-wide $mpi build/ch-audit/megamoe gemm $F --rows 4096,12288 --tile 192 --iters 3
r 3 audit-break-gemm $mpi build/ch-break/megamoe gemm $F --rows 4096 --iters 3
for n in audit-gemm audit-gemm-wide audit-break-gemm; do echo "$n: $(grep -c 'ring audit' /tmp/c-$n.log) ring-audit lines" | tee -a $OUT/steps.txt; done
r 4 stall-pairs $mpi build/ch-inject/megamoe gemm $N --rows 300 --iters 3
r 4 stall-wide $mpi build/ch-inject/megamoe gemm $N --rows 2000 --tile 192 --iters 3
grep -h "timed out" /tmp/c-stall-*.log | tee -a $OUT/steps.txt
(cd /tmp && tar czf $OUT/logs.tgz c-*.log)
echo "total $((SECONDS-t0)) s"
