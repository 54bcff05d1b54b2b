# the core's grouped scales: 2 slots (cg) / per block / 2 slots through L1 (ca) / 3 slots one group
# ahead / 3 slots ahead through L1, x 2 rounds alternating; ragged rows for the new forms
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
for v in "ng -DMM_GEMM_GROUP_SCALES=0" "ca -DMM_SCALES_CA" "ah -DMM_SCALE_SLOTS=3" "ahca -DMM_SCALE_SLOTS=3 -DMM_SCALES_CA"; do
  set -- $v; n=$1; shift
  mkdir -p build/$n && cp -a build/src build/kernels build/$n/ && rm -f build/$n/kernels/gemm.o build/$n/megamoe
  make $C BUILD=build/$n NVEXTRA="$*" build/$n/megamoe > $OUT/build-$n.log 2>&1 &
done
wait
echo "builds $((SECONDS-t0)) s"
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
K="--config tests/configs/small-k512.json --ep 2"
for n in ca ah ahca; do
  timeout 60 $mpi build/$n/megamoe gemm $K --rows 1,3,37,129,300,2000 --spread skewed --tile 128 --iters 3 > $OUT/ragged-$n.txt 2>&1; echo "ragged $n rc=$?"
  timeout 60 $mpi build/$n/megamoe gemm $F --rows 37,3000,20000 --spread skewed --tile 128 --iters 3 >> $OUT/ragged-$n.txt 2>&1; echo "ragged flash $n rc=$?"
done
grep -hE "^gemm[12] " $OUT/ragged-*.txt | grep -c " OK "; grep -hE "^gemm[12] " $OUT/ragged-*.txt | grep -v " OK " | head
{
for round in 1 2; do
  for b in grouped ng ca ah ahca; do
    bin=build/megamoe; [ $b != grouped ] && bin=build/$b/megamoe
    echo "== round $round $b flash"; timeout 100 $mpi $bin gemm $F --rows 12288 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b pro"; timeout 100 $mpi $bin gemm $P --rows 49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
echo "total $((SECONDS-t0)) s"
