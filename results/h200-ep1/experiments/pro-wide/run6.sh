# claims read by one thread (a cluster-scope acquire each) and passed on in shared memory, against the fixed order
# result waited for only there), against the fixed order, 1 round; the wide form's ragged rows and
# memcheck; the gemm files of both builds (the headline is the default's)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C GIT_REV=${GIT_REV:-unknown} build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
mkdir -p build/fixed && cp -a build/src build/kernels build/fixed/ && rm -f build/fixed/kernels/gemm.o build/fixed/megamoe
make $C BUILD=build/fixed NVEXTRA=-DMM_WIDE_CLAIMS=0 build/fixed/megamoe > $OUT/build-fixed.log 2>&1 || { tail -20 $OUT/build-fixed.log; exit 1; }
echo "builds $((SECONDS-t0)) s"
r() { local want=$1 n=$2; shift 2; local t=$SECONDS; timeout 100 "$@" > /tmp/c-$n.log 2>&1; local rc=$?; printf '%-30s rc=%-3d want %d %4ds\n' $n $rc $want $((SECONDS-t)) | tee -a $OUT/steps.txt; }
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
N="--config tests/configs/small-n2048.json --ep 2"
r 0 tiny-skewed-wide $mpi build/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile 192 --iters 3
r 0 k512-skewed-wide $mpi build/megamoe gemm --config tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile 192 --iters 3
r 0 n2048-skewed-wide $mpi build/megamoe gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --tile 192 --iters 3
r 0 memcheck-n2048-wide $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no build/megamoe gemm $N --rows 37,300 --spread skewed --tile 192 --iters 1 --warmup 0
grep -hE "^gemm[12] " /tmp/c-*wide.log | grep -c " OK " | sed 's/^/wide OK rows: /' | tee -a $OUT/steps.txt
grep -hE "^gemm[12] " /tmp/c-*wide.log | grep -v " OK " | head -5 | tee -a $OUT/steps.txt
{
for b in claims fixed; do
  bin=build/megamoe; [ $b != claims ] && bin=build/$b/megamoe
  echo "== $b pro 192"; timeout 100 $mpi $bin gemm $P --rows 49152 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  echo "== $b flash 192"; timeout 100 $mpi $bin gemm $F --rows 12288,49152 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
for b in claims fixed; do
  bin=build/megamoe; [ $b != claims ] && bin=build/$b/megamoe
  timeout 100 $mpi $bin gemm $F --rows 8,64,512,4096,12288,49152 --iters 10 > $OUT/gemm-deepseek-v4-flash-ep8-$b.txt 2>&1; echo "flash $b rc=$?"
  timeout 100 $mpi $bin gemm $P --iters 10 > $OUT/gemm-deepseek-v4-pro-ep8-$b.txt 2>&1; echo "pro $b rc=$?"
done
grep -E "^gemm[12] .*(49152|12288)" $OUT/gemm-*.txt
(cd /tmp && tar czf $OUT/logs.tgz c-*.log)
echo "total $((SECONDS-t0)) s"
