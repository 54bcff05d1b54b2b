# why the core's grouped scales were slower (run2): grouped / per block / grouped with every
# producer warp waiting for every stage, x 3 rounds alternating
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
for v in "ng -DMM_GEMM_GROUP_SCALES=0" "wa -DMM_GEMM_GROUP_WAIT_ALL"; do
  set -- $v
  mkdir -p build/$1 && cp -a build/src build/kernels build/$1/ && rm -f build/$1/kernels/gemm.o build/$1/megamoe
  make $C BUILD=build/$1 NVEXTRA=$2 build/$1/megamoe > $OUT/build-$1.log 2>&1 &
done
wait
echo "builds $((SECONDS-t0)) s"
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
{
for round in 1 2 3; do
  for b in grouped ng wa; do
    bin=build/megamoe; [ $b != grouped ] && bin=build/$b/megamoe
    echo "== round $round $b flash"; timeout 100 $mpi $bin gemm $F --rows 12288 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b pro"; timeout 100 $mpi $bin gemm $P --rows 49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
echo "total $((SECONDS-t0)) s"
