# Thirtieth session, call 4 (one H200): the headline gemm files of the final code (call 3's
# gpu-check passed every step, but its files did not all come back and its build named the
# device copy's stale git HEAD), built with the commit's rev, then Pro and Flash at 49152 x 2 more.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi="mpirun --bind-to none -np 1"
make -j16 CJSON_HOME=$PWD/.deps/usr GIT_REV=$GIT_REV build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
mkdir -p $OUT/g
$mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,64,512,4096,12288,49152 --iters 10 --json $OUT/g/gemm-deepseek-v4-flash-ep8.json > $OUT/g/gemm-deepseek-v4-flash-ep8.txt 2>&1; echo "flash rc=$?"
$mpi build/megamoe gemm --config configs/deepseek-v4-pro.json --ep 8 --iters 10 --json $OUT/g/gemm-deepseek-v4-pro-ep8.json > $OUT/g/gemm-deepseek-v4-pro-ep8.txt 2>&1; echo "pro rc=$?"
for i in 1 2; do
  $mpi build/megamoe gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 49152 --iters 10 2>&1 | grep -E "^gemm"
  $mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 49152 --iters 10 2>&1 | grep -E "^gemm"
done > $OUT/g/repeats.txt
grep -E "^gemm" $OUT/g/*.txt | awk '{print $1,$2,$9,$10,$16}'
cat $OUT/g/repeats.txt | awk '{print $1,$2,$9,$10,$16}'
(cd $OUT && tar czf gemm.tgz g && rm -rf g)
