# Twenty-ninth session, call 2 (one H200). Three questions in one call:
# (1) decode bisect (prepared in the twenty-eighth session, decode-bisect/run1.sh): Flash decode
#     GEMM2 512 rows 86.8 us (2afce3e) -> 92-94 since; default vs -DMM_GEMM_BAND=0 vs
#     -DMM_GEMM_GIVE_UP=0 vs 2afce3e's own tree, x 3 rounds alternating.
# (2) the new auto rule: Pro at 1024 rows an expert now takes the wide form (rotated walk, the
#     default since call 1): auto vs --tile 128 in the same call.
# (3) the 128 x 128 pairs' walk rotated (-DMM_GEMM_ROTATE=1): ragged-row correctness + memcheck,
#     then timing at 128-tile sizes (Flash 4096, Pro 4096, Pro 49152 --tile 128).
# Carry [".deps", "build/old-2afce3e"] (git archive 2afce3e Makefile src kernels configs).
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
[ -f build/old-2afce3e/Makefile ] || { echo "build/old-2afce3e not carried"; exit 1; }
make -j16 $C GIT_REV=${GIT_REV:-unknown} build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
(cd build/old-2afce3e && make -j8 $C GIT_REV=2afce3e build/megamoe > $OUT/build-old.log 2>&1) &
for v in band0:-DMM_GEMM_BAND=0 giveup0:-DMM_GEMM_GIVE_UP=0 rot128:-DMM_GEMM_ROTATE=1; do
  b=${v%%:*}; f=${v#*:}
  mkdir -p build/$b && cp -a build/src build/kernels build/$b/ && rm -f build/$b/kernels/gemm.o build/$b/megamoe
  (make $C BUILD=build/$b NVEXTRA=$f build/$b/megamoe > $OUT/build-$b.log 2>&1) &
done
wait
for b in band0 giveup0 rot128 old-2afce3e; do
  x=build/$b/megamoe; [ $b = old-2afce3e ] && x=build/old-2afce3e/build/megamoe
  [ -x $x ] || { echo "build $b failed"; tail -20 $OUT/build-*.log; exit 1; }
done
echo "builds $((SECONDS-t0)) s"
r() { local n=$1; shift; local t=$SECONDS; timeout 150 "$@" > /tmp/c-$n.log 2>&1; local rc=$?; printf '%-34s rc=%-3d %4ds\n' $n $rc $((SECONDS-t)); }
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
N="--config tests/configs/small-n2048.json --ep 2"
B=build/rot128/megamoe
r rot128-tiny-skewed $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile 128 --iters 3
r rot128-tiny-routing $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,37,300,2000 --spread routing --routing rank-skew:0.9 --tile 128 --iters 3
r rot128-k512-skewed $mpi $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile 128 --iters 3
r rot128-n2048-skewed $mpi $B gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --tile 128 --iters 3
r rot128-flash-skewed $mpi $B gemm $F --rows 37,3000,20000 --spread skewed --tile 128 --iters 3
r rot128-memcheck-n2048 $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm $N --rows 37,300,2000 --spread skewed --tile 128 --iters 1 --warmup 0
r default-pro-skewed-auto $mpi build/megamoe gemm $P --rows 1000,30000,49152 --spread skewed --iters 3
echo "OK rows: $(grep -hE '^gemm[12] ' /tmp/c-rot128-*.log /tmp/c-default-*.log | grep -c ' OK ')  not OK: $(grep -hE '^gemm[12] ' /tmp/c-rot128-*.log /tmp/c-default-*.log | grep -vc ' OK ')"
grep -h "ERROR SUMMARY" /tmp/c-rot128-memcheck-n2048.log
echo "tests $((SECONDS-t0)) s"
{
for round in 1 2 3; do
  for b in default band0 giveup0 old; do
    bin=build/megamoe; [ $b = band0 ] && bin=build/band0/megamoe; [ $b = giveup0 ] && bin=build/giveup0/megamoe
    [ $b = old ] && bin=build/old-2afce3e/build/megamoe
    echo "== round $round $b flash decode"; timeout 60 $mpi $bin gemm $F --rows 8,64,512 --iters 30 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b pro decode"; timeout 60 $mpi $bin gemm $P --rows 64,512 --iters 30 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/decode.txt 2>&1
echo "decode $((SECONDS-t0)) s"
{
for round in 1 2; do
  echo "== round $round auto pro"; timeout 100 $mpi build/megamoe gemm $P --rows 49152 --iters 10 2>&1 | grep -E "^gemm[12] |^# tile|rror|TIMEOUT"
  for b in default rot128; do
    bin=build/megamoe; [ $b = rot128 ] && bin=build/rot128/megamoe
    echo "== round $round $b t128 pro"; timeout 100 $mpi $bin gemm $P --rows 4096,49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b t128 flash"; timeout 100 $mpi $bin gemm $F --rows 4096,49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
(cd /tmp && tar czf $OUT/logs.tgz c-*.log)
echo "total $((SECONDS-t0)) s"
