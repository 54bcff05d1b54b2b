# the wide form's ring depth, epilogue and load floor (timing builds; ablations give wrong outputs)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C="CJSON_HOME=$PWD/.deps/usr"
declare -A V=([base]="" [e0]="-DMM_WIDE_STAGING=0" [s5]="-DMM_WIDE_STAGING=0 -DMM_WIDE_STAGES=5" [s3]="-DMM_WIDE_STAGES=3" [noMMA]="-DMM_WIDE_ABLATE=1" [nostore]="-DMM_WIDE_ABLATE=2")
for v in "${!V[@]}"; do make -j6 CJSON_HOME=$PWD/.deps/usr BUILD=build/$v NVEXTRA="${V[$v]}" build/$v/megamoe > $OUT/build-$v.log 2>&1 & done
wait
for v in "${!V[@]}"; do [ -x build/$v/megamoe ] || { echo "build $v failed"; tail -20 $OUT/build-$v.log; exit 1; }; done
for round in 1 2; do
  for v in base e0 s5 s3 noMMA nostore; do
    for cfg in flash pro; do
      rows=24576,49152; [ $cfg = pro ] && rows=49152
      echo "== round $round $v $cfg"
      timeout 120 mpirun --bind-to none -np 1 build/$v/megamoe gemm --config configs/deepseek-v4-$cfg.json --ep 8 --rows $rows --tile 192 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    done
  done
done > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
