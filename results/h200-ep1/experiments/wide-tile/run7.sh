# the final code's check (every mode) and gemm rows, and scale groups of 4 against 8, x 2 alternating
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none"
make -j8 $C > $OUT/build.log 2>&1 &
make -j8 $C BUILD=build/g8 NVEXTRA=-DMM_WIDE_GROUP=8 build/g8/megamoe > $OUT/build-g8.log 2>&1 &
wait
timeout 200 $mpi -np 1 build/megamoe check --json $OUT/check-ep1.json > $OUT/check.txt 2>&1; echo "check rc=$?"; tail -1 $OUT/check.txt
{
for round in 1 2; do
  for b in g4 g8; do
    bin=build/megamoe; [ $b = g8 ] && bin=build/g8/megamoe
    echo "== round $round $b flash"; timeout 120 $mpi -np 1 $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,24576,49152 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b pro"; timeout 120 $mpi -np 1 $bin gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 49152 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
echo "== the default gemm rows (auto)"
timeout 120 $mpi -np 1 build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,64,512,4096,12288,49152 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
