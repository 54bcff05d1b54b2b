# Wide pairs claim their items (MM_WIDE_CLAIMS, default) against the fixed order, both with narrow
# tiles; and claims without narrow tiles: correctness first (ragged rows on both scale paths,
# memcheck, racecheck judged, ring audit, the injected stall), then x 2 rounds alternating
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
for v in fixed:-DMM_WIDE_CLAIMS=0 wholecols:-DMM_WIDE_NARROW=0; do
  b=${v%%:*}; f=${v#*:}
  mkdir -p build/$b && cp -a build/src build/kernels build/$b/ && rm -f build/$b/kernels/gemm.o build/$b/megamoe
  make $C BUILD=build/$b NVEXTRA=$f build/$b/megamoe > $OUT/build-$b.log 2>&1 || { tail -20 $OUT/build-$b.log; exit 1; }
done
(make -j8 $C BUILD=build/audit NVEXTRA=-DMM_RING_AUDIT build/audit/megamoe > $OUT/build-audit.log 2>&1;
 make -j8 $C BUILD=build/inject NVEXTRA=-DMM_INJECT_STALL_MS=12000 build/inject/megamoe > $OUT/build-inject.log 2>&1) &
echo "builds $((SECONDS-t0)) s"
r() { local want=$1 n=$2; shift 2; local t=$SECONDS; timeout 150 "$@" > /tmp/c-$n.log 2>&1; local rc=$?; printf '%-30s rc=%-3d want %d %4ds\n' $n $rc $want $((SECONDS-t)) | tee -a $OUT/steps.txt; }
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
N="--config tests/configs/small-n2048.json --ep 2"
r 0 tiny-skewed-wide $mpi build/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile 192 --iters 3
r 0 tiny-routing-wide $mpi build/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,37,300,2000 --spread routing --routing rank-skew:0.9 --tile 192 --iters 3
r 0 k512-skewed-wide $mpi build/megamoe gemm --config tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile 192 --iters 3
r 0 n2048-skewed-wide $mpi build/megamoe gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --tile 192 --iters 3
r 0 flash-skewed-wide $mpi build/megamoe gemm $F --rows 37,3000,20000 --spread skewed --tile 192 --iters 3
r 0 pro-routing-wide $mpi build/megamoe gemm $P --rows 4096,49152 --spread routing --tile 192 --iters 3
r 0 memcheck-n2048-wide $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no build/megamoe gemm $N --rows 37,300 --spread skewed --tile 192 --iters 1 --warmup 0
r 0 racecheck-n2048-wide $mpi compute-sanitizer --tool racecheck --report-api-errors no build/megamoe gemm $N --rows 37,300 --spread skewed --tile 192 --iters 1 --warmup 0
echo "racecheck-n2048-wide outside the known class: $(scripts/racecheck-unknown.sh /tmp/c-racecheck-n2048-wide.log); summary: $(grep -c 'RACECHECK SUMMARY' /tmp/c-racecheck-n2048-wide.log)" | tee -a $OUT/steps.txt
grep -hE "^gemm[12] " /tmp/c-*wide.log | grep -c " OK " | sed 's/^/wide OK rows: /' | tee -a $OUT/steps.txt
grep -hE "^gemm[12] " /tmp/c-*wide.log | grep -v " OK " | head -5 | tee -a $OUT/steps.txt
wait
r 0 audit-gemm-wide $mpi build/audit/megamoe gemm $F --rows 4096,12288 --tile 192 --spread skewed --iters 3
r 0 audit-pro-wide $mpi build/audit/megamoe gemm $P --rows 49152 --tile 192 --iters 3
for n in audit-gemm-wide audit-pro-wide; do echo "$n: $(grep -c 'ring audit' /tmp/c-$n.log) ring-audit lines" | tee -a $OUT/steps.txt; done
r 4 stall-wide $mpi build/inject/megamoe gemm --config tests/configs/small-k512.json --ep 2 --rows 300 --tile 192 --iters 3
r 4 stall-wide-n2048 $mpi build/inject/megamoe gemm $N --rows 2000 --tile 192 --iters 3
grep -h "timed out" /tmp/c-stall-*.log | tee -a $OUT/steps.txt
echo "tests $((SECONDS-t0)) s"
{
for round in 1 2; do
  for b in claims fixed wholecols; do
    bin=build/megamoe; [ $b != claims ] && bin=build/$b/megamoe
    echo "== round $round $b pro 192"; timeout 120 $mpi $bin gemm $P --rows 46080,49152,55296 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b flash routing + uniform 192"; timeout 100 $mpi $bin gemm $F --rows 49152 --spread routing --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    [ $b = wholecols ] || timeout 100 $mpi $bin gemm $F --rows 12288,49152 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
  echo "== round $round pro 128"; timeout 100 $mpi build/megamoe gemm $P --rows 49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
(cd /tmp && tar czf $OUT/logs.tgz c-*.log)
echo "total $((SECONDS-t0)) s"
