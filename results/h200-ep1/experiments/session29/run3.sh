# Twenty-ninth session, call 3 (one H200): the 128 x 128 producer publishing item n + 1 before
# item n's last K block (e3fcebf+), decode launches without the band, the give-up flag read before
# the stage wait. Correctness of the new default (ragged rows in both tile forms and both launch
# kinds, memcheck, ring audit, the injected stall of a pair and of single CTAs, check on 1 GPU),
# then old (9d7b960's tree, carried as build/old-9d7b960) / new / new with
# -DMM_GEMM_PUBLISH_AHEAD=0 (the band and flag changes alone), x 3 rounds alternating.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
[ -f build/old-9d7b960/Makefile ] || { echo "build/old-9d7b960 not carried"; exit 1; }
make -j16 $C GIT_REV=${GIT_REV:-unknown} build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
(cd build/old-9d7b960 && make -j8 $C GIT_REV=9d7b960 build/megamoe > $OUT/build-old.log 2>&1) &
for v in noahead:-DMM_GEMM_PUBLISH_AHEAD=0 audit:-DMM_RING_AUDIT inject:-DMM_INJECT_STALL_MS=12000; do
  b=${v%%:*}; f=${v#*:}
  mkdir -p build/$b && cp -a build/src build/kernels build/$b/ && rm -f build/$b/kernels/gemm.o build/$b/megamoe
  (make -j4 $C BUILD=build/$b NVEXTRA=$f build/$b/megamoe > $OUT/build-$b.log 2>&1) &
done
wait
for x in build/noahead/megamoe build/audit/megamoe build/inject/megamoe build/old-9d7b960/build/megamoe; do
  [ -x $x ] || { echo "build $x failed"; tail -20 $OUT/build-*.log; exit 1; }
done
echo "builds $((SECONDS-t0)) s"
r() { local want=$1 n=$2; shift 2; local t=$SECONDS; timeout 150 "$@" > /tmp/c-$n.log 2>&1; local rc=$?; printf '%-30s rc=%-3d want %d %4ds\n' $n $rc $want $((SECONDS-t)); }
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
N="--config tests/configs/small-n2048.json --ep 2"
B=build/megamoe
for t in 128 192; do
  r 0 t$t-tiny-skewed $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile $t --iters 3
  r 0 t$t-tiny-routing $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,37,300,2000 --spread routing --routing rank-skew:0.9 --tile $t --iters 3
  r 0 t$t-k512-skewed $mpi $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile $t --iters 3
  r 0 t$t-n2048-skewed $mpi $B gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --tile $t --iters 3
  r 0 t$t-flash-skewed $mpi $B gemm $F --rows 8,37,512,3000,20000 --spread skewed --tile $t --iters 3
done
r 0 t128-pro-uniform $mpi $B gemm $P --rows 8,64,512,4096 --iters 3
r 0 memcheck-n2048 $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm $N --rows 3,37,300,2000 --spread skewed --tile 128 --iters 1 --warmup 0
r 0 audit-gemm $mpi build/audit/megamoe gemm $F --rows 8,512,4096 --tile 128 --iters 3
r 0 audit-gemm-n2048 $mpi build/audit/megamoe gemm $N --rows 3,37,300,2000 --spread skewed --tile 128 --iters 3
r 4 stall-pairs $mpi build/inject/megamoe gemm $N --rows 2000 --tile 128 --iters 3
r 4 stall-single $mpi build/inject/megamoe gemm $N --rows 37 --tile 128 --iters 3
r 0 check-np1 $mpi $B check
echo "OK rows: $(grep -hE '^gemm[12] ' /tmp/c-t*.log /tmp/c-memcheck*.log /tmp/c-audit*.log | grep -c ' OK ')  not OK: $(grep -hE '^gemm[12] ' /tmp/c-t*.log /tmp/c-memcheck*.log /tmp/c-audit*.log | grep -vc ' OK ')"
grep -h "ERROR SUMMARY" /tmp/c-memcheck-n2048.log; grep -h "ring audit" /tmp/c-audit*.log | head -3
grep -h "timed out\|TIMEOUT" /tmp/c-stall-*.log | head -4; tail -3 /tmp/c-check-np1.log
echo "tests $((SECONDS-t0)) s"
{
for round in 1 2 3; do
  for b in old new noahead; do
    bin=build/megamoe; [ $b = old ] && bin=build/old-9d7b960/build/megamoe; [ $b = noahead ] && bin=build/noahead/megamoe
    echo "== round $round $b flash"; timeout 60 $mpi $bin gemm $F --rows 8,64,512,4096 --iters 30 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round $b pro"; timeout 60 $mpi $bin gemm $P --rows 64,512,4096 --iters 20 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
{
for round in 1 2; do
  for b in old new; do
    bin=build/megamoe; [ $b = old ] && bin=build/old-9d7b960/build/megamoe
    echo "== round $round $b large t128"; timeout 100 $mpi $bin gemm $F --rows 49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} >> $OUT/ab.txt 2>&1
(cd /tmp && tar czf $OUT/logs.tgz c-*.log)
echo "total $((SECONDS-t0)) s"
