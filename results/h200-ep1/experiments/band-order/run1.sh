# the banded item order (MM_GEMM_BAND, default 8) against the plain order (0) and bands of 4 / 16,
# x 2 rounds alternating; correctness on ragged experts with more column tiles than a band
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
echo "main build $((SECONDS-t0)) s"
for b in 0 4 16; do
  mkdir -p build/b$b && cp -a build/src build/kernels build/b$b/ && rm -f build/b$b/kernels/gemm.o build/b$b/megamoe
  make $C BUILD=build/b$b NVEXTRA=-DMM_GEMM_BAND=$b build/b$b/megamoe > $OUT/build-b$b.log 2>&1 &
done
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
r() { local n=$1; shift; local t=$SECONDS; timeout 120 "$@" > $OUT/$n.txt 2>&1; echo "$n rc=$? $((SECONDS-t)) s"; }
r flash-skewed-128 $mpi build/megamoe gemm $F --rows 37,3000,20000 --spread skewed --tile 128 --iters 3
r flash-skewed-192 $mpi build/megamoe gemm $F --rows 3000,20000,49152 --spread skewed --tile 192 --iters 3
r pro-routing $mpi build/megamoe gemm $P --rows 4096,30000 --spread routing --iters 3
grep -h "FAIL\|rror" $OUT/flash-*.txt $OUT/pro-*.txt | head
grep -hE "^gemm[12] |^# order" $OUT/flash-*.txt $OUT/pro-*.txt
wait
ls -la build/b0/megamoe build/b4/megamoe build/b16/megamoe | awk '{print $NF}'
echo "builds done $((SECONDS-t0)) s"
{
for round in 1 2; do
  for b in 8 0 16 4; do
    bin=build/megamoe; [ $b != 8 ] && bin=build/b$b/megamoe
    t=$SECONDS
    echo "== round $round band $b flash"; timeout 100 $mpi $bin gemm $F --rows 12288,49152 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT|^# order"
    echo "== round $round band $b pro 128"; timeout 100 $mpi $bin gemm $P --rows 49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round band $b pro 192"; timeout 100 $mpi $bin gemm $P --rows 49152 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "   ($((SECONDS-t)) s)"
  done
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
echo "total $((SECONDS-t0)) s"
