# The wide form's narrow tiles (<= 64 rows: two warpgroups of 64 columns, 64 rows loaded by CTA 0
# alone) against MM_WIDE_NARROW=0 (one warpgroup, all 128 columns): correctness of the new path
# first (ragged rows on the per-block and grouped scale paths, memcheck, racecheck judged, ring
# audit), then x 2 rounds alternating on Pro and Flash
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
mkdir -p build/old && cp -a build/src build/kernels build/old/ && rm -f build/old/kernels/gemm.o build/old/megamoe
make $C BUILD=build/old NVEXTRA=-DMM_WIDE_NARROW=0 build/old/megamoe > $OUT/build-old.log 2>&1 || { tail -20 $OUT/build-old.log; exit 1; }
(make -j12 $C BUILD=build/audit NVEXTRA=-DMM_RING_AUDIT build/audit/megamoe > $OUT/build-audit.log 2>&1) &
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
r 0 memcheck-tiny-wide $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no build/megamoe gemm --config configs/tiny.json --ep 2 --rows 37,300 --spread skewed --tile 192 --iters 1 --warmup 0
r 0 racecheck-n2048-wide $mpi compute-sanitizer --tool racecheck --report-api-errors no build/megamoe gemm $N --rows 37,300 --spread skewed --tile 192 --iters 1 --warmup 0
echo "racecheck-n2048-wide outside the known class: $(scripts/racecheck-unknown.sh /tmp/c-racecheck-n2048-wide.log); summary: $(grep -c 'RACECHECK SUMMARY' /tmp/c-racecheck-n2048-wide.log)" | tee -a $OUT/steps.txt
grep -hE "^gemm[12] " /tmp/c-*wide.log | grep -c " OK " | sed 's/^/wide OK rows: /' | tee -a $OUT/steps.txt
grep -hE "^gemm[12] " /tmp/c-*wide.log | grep -v " OK " | head -5 | tee -a $OUT/steps.txt
wait
r 0 audit-gemm-wide $mpi build/audit/megamoe gemm $F --rows 4096,12288 --tile 192 --spread skewed --iters 3
r 0 audit-pro-wide $mpi build/audit/megamoe gemm $P --rows 49152 --tile 192 --iters 3
for n in audit-gemm-wide audit-pro-wide; do echo "$n: $(grep -c 'ring audit' /tmp/c-$n.log) ring-audit lines" | tee -a $OUT/steps.txt; done
echo "tests $((SECONDS-t0)) s"
{
for round in 1 2; do
  for b in narrow old; do
    bin=build/megamoe; [ $b = old ] && bin=build/old/megamoe
    echo "== round $round $b pro 192"; timeout 120 $mpi $bin gemm $P --rows 46080,49152,55296 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b flash routing 192"; timeout 100 $mpi $bin gemm $F --rows 49152 --spread routing --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
  echo "== round $round pro 128"; timeout 100 $mpi build/megamoe gemm $P --rows 49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  echo "== round $round flash routing 128"; timeout 100 $mpi build/megamoe gemm $F --rows 49152 --spread routing --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
(cd /tmp && tar czf $OUT/logs.tgz c-*.log)
echo "total $((SECONDS-t0)) s"
