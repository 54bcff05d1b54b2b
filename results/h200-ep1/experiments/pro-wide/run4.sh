# The final code: claims posted a whole item ahead (n + 2) against the fixed order, x 2 rounds
# alternating; the wide form's ragged rows, memcheck and injected stall; the headline gemm files
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C GIT_REV=${GIT_REV:-unknown} build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
mkdir -p build/fixed && cp -a build/src build/kernels build/fixed/ && rm -f build/fixed/kernels/gemm.o build/fixed/megamoe
make $C BUILD=build/fixed NVEXTRA=-DMM_WIDE_CLAIMS=0 build/fixed/megamoe > $OUT/build-fixed.log 2>&1 || { tail -20 $OUT/build-fixed.log; exit 1; }
(make -j8 $C BUILD=build/inject NVEXTRA=-DMM_INJECT_STALL_MS=12000 build/inject/megamoe > $OUT/build-inject.log 2>&1) &
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
r 0 memcheck-n2048-wide $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no build/megamoe gemm $N --rows 37,300 --spread skewed --tile 192 --iters 1 --warmup 0
grep -hE "^gemm[12] " /tmp/c-*wide.log | grep -c " OK " | sed 's/^/wide OK rows: /' | tee -a $OUT/steps.txt
grep -hE "^gemm[12] " /tmp/c-*wide.log | grep -v " OK " | head -5 | tee -a $OUT/steps.txt
wait
r 4 stall-wide-n2048 $mpi build/inject/megamoe gemm $N --rows 2000 --tile 192 --iters 3
grep -h "timed out" /tmp/c-stall-*.log | tee -a $OUT/steps.txt
echo "tests $((SECONDS-t0)) s"
{
for round in 1 2; do
  for b in claims fixed; do
    bin=build/megamoe; [ $b != claims ] && bin=build/$b/megamoe
    echo "== round $round $b pro 192"; timeout 120 $mpi $bin gemm $P --rows 46080,49152 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b flash routing + uniform 192"; timeout 100 $mpi $bin gemm $F --rows 49152 --spread routing --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    timeout 100 $mpi $bin gemm $F --rows 12288,49152 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
echo "ab $((SECONDS-t0)) s"
timeout 150 $mpi build/megamoe gemm $F --rows 8,64,512,4096,12288,49152 --iters 10 > $OUT/gemm-deepseek-v4-flash-ep8.txt 2>&1; echo "flash rc=$?"
timeout 150 $mpi build/megamoe gemm $P --iters 10 > $OUT/gemm-deepseek-v4-pro-ep8.txt 2>&1; echo "pro rc=$?"
grep -E "^gemm[12] " $OUT/gemm-*.txt
(cd /tmp && tar czf $OUT/logs.tgz c-*.log)
echo "total $((SECONDS-t0)) s"
