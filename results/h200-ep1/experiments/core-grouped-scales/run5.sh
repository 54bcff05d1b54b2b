# ncu source counters (warp-state samples per SASS instruction) of the core's 128 x 128 kernel on
# Pro GEMM1 49152 rows: grouped scales against per block
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
mkdir -p build/ng && cp -a build/src build/kernels build/ng/ && rm -f build/ng/kernels/gemm.o build/ng/megamoe
make $C BUILD=build/ng NVEXTRA=-DMM_GEMM_GROUP_SCALES=0 build/ng/megamoe > $OUT/build-ng.log 2>&1
NCU=/usr/local/cuda/bin/ncu
P="--config configs/deepseek-v4-pro.json --ep 8"
for b in grouped ng; do
  bin=build/megamoe; [ $b = ng ] && bin=build/ng/megamoe
  t=$SECONDS
  timeout 200 $NCU -k regex:grouped_gemm_kernel -c 1 --section SourceCounters --section WarpStateStats -f -o /tmp/rep-$b \
    $bin gemm $P --rows 49152 --tile 128 --iters 1 --warmup 0 > $OUT/ncu-run-$b.txt 2>&1
  echo "$b rc=$? $((SECONDS-t)) s"
  $NCU -i /tmp/rep-$b.ncu-rep --page source --print-source sass --csv > /tmp/src-$b.csv 2>/dev/null
  python3 scripts/ncu-stalls.py /tmp/src-$b.csv 45 > $OUT/stalls-$b.txt 2>&1
  $NCU -i /tmp/rep-$b.ncu-rep --page details > $OUT/details-$b.txt 2>&1
done
head -60 $OUT/stalls-grouped.txt
head -60 $OUT/stalls-ng.txt
