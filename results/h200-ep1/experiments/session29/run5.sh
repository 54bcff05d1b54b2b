# Twenty-ninth session, last call (one H200): gpu-check without the tool runs (call 4's full
# gpu-check of e4bd859 passed every tool run, then hit the call's 600 s limit before the gemm and
# bench steps), then Flash decode with the write and the clean flush and Pro at 46080 / 49152 rows
# (auto), the same build.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$SECONDS
GPU_CHECK_TOOLS=0 bash scripts/gpu-check.sh build/gl > $OUT/gpu-check.txt 2>&1
echo "gpu-check rc=$? $((SECONDS-t0)) s" | tee -a $OUT/gpu-check.txt
cp build/gl/gpu-check-logs.tgz build/gl/gemm-*.json $OUT/ 2>/dev/null
mpi="mpirun --bind-to none -np 1"
F="--config configs/deepseek-v4-flash.json --ep 8"
{
for round in 1 2; do
  for fl in on clean; do
    echo "== round $round flush $fl"; timeout 60 $mpi build/megamoe gemm $F --rows 64,512 --iters 30 --l2-flush $fl 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
echo "== pro auto"; timeout 100 $mpi build/megamoe gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 46080,49152 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
} > $OUT/extra.txt 2>&1
cat $OUT/extra.txt
echo "total $((SECONDS-t0)) s"
