# (prepared in the twenty-eighth session, not yet run) the wide pairs' walk, three ways, x 2 rounds
# alternating: the default fixed walk; the fixed walk rotated each wave (-DMM_WIDE_ROTATE=1: zero
# cost, predicted to balance Pro's 1024 rows as claims did, 5-7%, and to leave Flash alone: a wave
# takes the same items either way); claims taken by one producer thread (-DMM_WIDE_CLAIMS=1: does
# the claims' 3-4% loss on Flash GEMM2 go with 127 fewer cluster-scope acquires an item?).
# Correctness of both variant builds first (ragged rows on both scale paths, memcheck, racecheck
# judged, ring audit; the claims build's injected stall)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C GIT_REV=${GIT_REV:-unknown} build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
for v in claims:-DMM_WIDE_CLAIMS=1 rotate:-DMM_WIDE_ROTATE=1; do
  b=${v%%:*}; f=${v#*:}
  mkdir -p build/$b && cp -a build/src build/kernels build/$b/ && rm -f build/$b/kernels/gemm.o build/$b/megamoe
  make $C BUILD=build/$b NVEXTRA=$f build/$b/megamoe > $OUT/build-$b.log 2>&1 || { tail -20 $OUT/build-$b.log; exit 1; }
done
(make -j8 $C BUILD=build/claims-audit NVEXTRA="-DMM_WIDE_CLAIMS=1 -DMM_RING_AUDIT" build/claims-audit/megamoe > $OUT/build-audit.log 2>&1;
 make -j8 $C BUILD=build/claims-inject NVEXTRA="-DMM_WIDE_CLAIMS=1 -DMM_INJECT_STALL_MS=12000" build/claims-inject/megamoe > $OUT/build-inject.log 2>&1) &
echo "builds $((SECONDS-t0)) s"
r() { local want=$1 n=$2; shift 2; local t=$SECONDS; timeout 150 "$@" > /tmp/c-$n.log 2>&1; local rc=$?; printf '%-34s rc=%-3d want %d %4ds\n' $n $rc $want $((SECONDS-t)) | tee -a $OUT/steps.txt; }
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
N="--config tests/configs/small-n2048.json --ep 2"
for b in claims rotate; do
  B=build/$b/megamoe
  r 0 $b-tiny-skewed-wide $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile 192 --iters 3
  r 0 $b-tiny-routing-wide $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,37,300,2000 --spread routing --routing rank-skew:0.9 --tile 192 --iters 3
  r 0 $b-k512-skewed-wide $mpi $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile 192 --iters 3
  r 0 $b-n2048-skewed-wide $mpi $B gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --tile 192 --iters 3
  r 0 $b-flash-skewed-wide $mpi $B gemm $F --rows 37,3000,20000 --spread skewed --tile 192 --iters 3
  r 0 $b-memcheck-n2048-wide $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm $N --rows 37,300 --spread skewed --tile 192 --iters 1 --warmup 0
done
r 0 claims-racecheck-n2048-wide $mpi compute-sanitizer --tool racecheck --report-api-errors no build/claims/megamoe gemm $N --rows 37,300 --spread skewed --tile 192 --iters 1 --warmup 0
echo "claims racecheck outside the known class: $(scripts/racecheck-unknown.sh /tmp/c-claims-racecheck-n2048-wide.log); summary: $(grep -c 'RACECHECK SUMMARY' /tmp/c-claims-racecheck-n2048-wide.log)" | tee -a $OUT/steps.txt
grep -hE "^gemm[12] " /tmp/c-*wide.log | grep -c " OK " | sed 's/^/wide OK rows: /' | tee -a $OUT/steps.txt
grep -hE "^gemm[12] " /tmp/c-*wide.log | grep -v " OK " | head -5 | tee -a $OUT/steps.txt
wait
r 0 claims-audit-pro-wide $mpi build/claims-audit/megamoe gemm $P --rows 49152 --tile 192 --iters 3
echo "claims-audit-pro-wide: $(grep -c 'ring audit' /tmp/c-claims-audit-pro-wide.log) ring-audit lines" | tee -a $OUT/steps.txt
r 4 claims-stall-wide-n2048 $mpi build/claims-inject/megamoe gemm $N --rows 2000 --tile 192 --iters 3
grep -h "timed out" /tmp/c-*stall-*.log | tee -a $OUT/steps.txt
echo "tests $((SECONDS-t0)) s"
{
for round in 1 2; do
  for b in fixed rotate claims; do
    bin=build/megamoe; [ $b != fixed ] && bin=build/$b/megamoe
    echo "== round $round $b pro 192"; timeout 100 $mpi $bin gemm $P --rows 46080,49152 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b flash 192"; timeout 100 $mpi $bin gemm $F --rows 12288,49152 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b flash routing 192"; timeout 100 $mpi $bin gemm $F --rows 49152 --spread routing --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
# gemm --json (landed in the twenty-eighth session without a GPU run): write a file, gate it on itself
timeout 120 $mpi build/megamoe gemm $F --rows 8,512,49152 --iters 10 --json $OUT/gemm-flash.json > /tmp/c-json-gemm.log 2>&1; echo "gemm --json rc=$?" | tee -a $OUT/steps.txt
build/megamoe gate --baseline $OUT/gemm-flash.json --current $OUT/gemm-flash.json --relative-to cublaslt > /tmp/c-json-gate.log 2>&1; echo "gate self rc=$?" | tee -a $OUT/steps.txt
tail -15 /tmp/c-json-gate.log
(cd /tmp && tar czf $OUT/logs.tgz c-*.log)
echo "total $((SECONDS-t0)) s"
