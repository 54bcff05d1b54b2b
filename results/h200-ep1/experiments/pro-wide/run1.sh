# Pro GEMM1 / GEMM2 on 128 x 128 against the wide form at 960 / 1024 / 1152 rows an expert
# (5, 5 1/3 and 6 wide tiles), x 2 rounds alternating; plus the wide form's loads alone
# (MM_WIDE_ABLATE=1, timing only) at the same rows: what a partial 64-row tile costs
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
mkdir -p build/ab && cp -a build/src build/kernels build/ab/ && rm -f build/ab/kernels/gemm.o build/ab/megamoe
make $C BUILD=build/ab NVEXTRA=-DMM_WIDE_ABLATE=1 build/ab/megamoe > $OUT/build-ab.log 2>&1 || { tail -20 $OUT/build-ab.log; exit 1; }
echo "builds $((SECONDS-t0)) s"
P="--config configs/deepseek-v4-pro.json --ep 8"
{
for round in 1 2; do
  for tile in 128 192; do
    echo "== round $round tile $tile"; timeout 120 $mpi build/megamoe gemm $P --rows 46080,49152,55296 --tile $tile --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
  echo "== round $round loads only (192)"; timeout 120 $mpi build/ab/megamoe gemm $P --rows 46080,49152,55296 --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
echo "total $((SECONDS-t0)) s"
