# the wide form's scales 4 K blocks at a time (grouped, the default) against per block
# (MM_WIDE_GROUP_SCALES=0) and 128 x 128, x 3 alternating; correctness of the grouped path
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none"
r() { local want=$1 n=$2; shift 2; local t0=$SECONDS; timeout 200 "$@" > $OUT/$n.log 2>&1; local rc=$?; printf '%-30s rc=%-3d want %d %4ds\n' $n $rc $want $((SECONDS-t0)); }
make -j8 $C > $OUT/build.log 2>&1 &
make -j8 $C BUILD=build/perblock NVEXTRA=-DMM_WIDE_GROUP_SCALES=0 build/perblock/megamoe > $OUT/build-perblock.log 2>&1 &
wait
(make -j16 $C audit audit-break > $OUT/build-audit.log 2>&1; make -j16 $C inject > $OUT/build-inject.log 2>&1) &
K="--config tests/configs/small-k512.json --ep 2"
r 0 k512-skewed-wide $mpi -np 1 build/megamoe gemm $K --rows 1,3,37,129,300,2000 --spread skewed --tile 192 --iters 3
r 0 k512-routing-wide $mpi -np 1 build/megamoe gemm $K --rows 1,37,300,2000 --spread routing --routing rank-skew:0.9 --tile 192 --iters 3
r 0 tiny-skewed-wide $mpi -np 1 build/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile 192 --iters 3
for tool in memcheck racecheck; do
  r 0 $tool-k512-wide $mpi -np 1 compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no build/megamoe gemm $K --rows 1,37,300 --spread skewed --tile 192 --iters 1 --warmup 0
  grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $OUT/$tool-k512-wide.log
done
grep -h "FAIL" $OUT/k512-*.log $OUT/tiny-*.log | head
{
for round in 1 2 3; do
  for b in grouped perblock t128; do
    bin=build/megamoe; t=192; [ $b = perblock ] && bin=build/perblock/megamoe; [ $b = t128 ] && t=128
    echo "== round $round $b flash"; timeout 120 $mpi -np 1 $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,24576,49152 --tile $t --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b pro"; timeout 120 $mpi -np 1 $bin gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 49152 --tile $t --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
wait
r 0 audit-gemm-wide $mpi -np 1 build/audit/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,4096,12288 --tile 192 --iters 3
r 3 audit-break-gemm-wide $mpi -np 1 build/audit-break/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288 --tile 192 --iters 3
for n in audit-gemm-wide audit-break-gemm-wide; do echo "$n: $(grep -c 'ring audit' $OUT/$n.log) ring-audit lines"; done
r 4 stall-wide-k512 $mpi -np 1 build/inject/megamoe gemm $K --rows 300 --tile 192 --iters 3
grep -h "timed out" $OUT/stall-wide-k512.log
cat $OUT/ab.txt
