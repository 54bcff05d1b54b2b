# a first measurement of chained tiles (the next large tile's first block issued before this one's
# rows are stored; MM_GEMM_CHAIN) against unchained, x 2 rounds alternating; this build spills
# (~90 bytes, ring state reloaded in the K loop): is the overlap worth removing them?
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
mkdir -p build/nc && cp -a build/src build/kernels build/nc/ && rm -f build/nc/kernels/gemm.o build/nc/megamoe
make $C BUILD=build/nc NVEXTRA=-DMM_GEMM_CHAIN=0 build/nc/megamoe > $OUT/build-nc.log 2>&1
echo "builds $((SECONDS-t0)) s"
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
K="--config tests/configs/small-k512.json --ep 2"
timeout 60 $mpi build/megamoe gemm $K --rows 1,3,37,129,300,2000 --spread skewed --tile 128 --iters 3 > $OUT/ragged.txt 2>&1; echo "ragged rc=$?"
timeout 60 $mpi build/megamoe gemm $F --rows 37,3000,20000 --spread skewed --tile 128 --iters 3 >> $OUT/ragged.txt 2>&1; echo "ragged flash rc=$?"
timeout 60 $mpi build/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,3,37,129,300 --spread skewed --iters 3 >> $OUT/ragged.txt 2>&1; echo "ragged tiny rc=$?"
grep -hE "^gemm[12] " $OUT/ragged.txt | grep -c " OK "; grep -hE "^gemm[12] " $OUT/ragged.txt | grep -v " OK " | head
{
for round in 1 2; do
  for b in chain nc; do
    bin=build/megamoe; [ $b = nc ] && bin=build/nc/megamoe
    echo "== round $round $b flash"; timeout 100 $mpi $bin gemm $F --rows 4096,12288,49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b pro"; timeout 100 $mpi $bin gemm $P --rows 4096,49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
echo "total $((SECONDS-t0)) s"
