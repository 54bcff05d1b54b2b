# Thirtieth session, call 2 (one H200): (1) correctness of 60b4c71's wide form (K block 0
# peeled, pack before the box stores): ragged rows on both scale paths, memcheck, racecheck, ring
# audit, injected stall; (2) its timing against da13dba (build/old-da13dba) with the order inside
# each round rotated (call 1 always ran the new build last); (3) MM_TILE_ZERO_LATE=1 for the core's
# 128 x 128 consume against the default, rotated the same way.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
[ -f build/old-da13dba/Makefile ] || { echo "build/old-da13dba not carried"; exit 1; }
make -j16 $C GIT_REV=${GIT_REV:-unknown} build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
(cd build/old-da13dba && make -j8 $C GIT_REV=da13dba build/megamoe > $OUT/build-old.log 2>&1) &
for v in zl:-DMM_TILE_ZERO_LATE=1 audit:-DMM_RING_AUDIT inject:-DMM_INJECT_STALL_MS=12000; do
  b=${v%%:*}; f=${v#*:}
  mkdir -p build/$b && cp -a build/src build/kernels build/$b/ && rm -f build/$b/kernels/gemm.o build/$b/megamoe
  (make -j4 $C BUILD=build/$b NVEXTRA=$f build/$b/megamoe > $OUT/build-$b.log 2>&1) &
done
wait
for x in build/zl/megamoe build/audit/megamoe build/inject/megamoe build/old-da13dba/build/megamoe; do
  [ -x $x ] || { echo "build $x failed"; tail -20 $OUT/build-*.log; exit 1; }
done
echo "builds $((SECONDS-t0)) s"
r() { local want=$1 n=$2; shift 2; local t=$SECONDS; timeout 120 "$@" > /tmp/c-$n.log 2>&1; local rc=$?; printf '%-30s rc=%-3d want %d %4ds\n' $n $rc $want $((SECONDS-t)); }
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
N="--config tests/configs/small-n2048.json --ep 2"
B=build/megamoe
r 0 w-tiny-skewed $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000,9000 --spread skewed --tile 192 --iters 3
r 0 w-tiny-routing $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,37,300,2000 --spread routing --routing rank-skew:0.9 --tile 192 --iters 3
r 0 w-k512-skewed $mpi $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000,9000 --spread skewed --tile 192 --iters 3
r 0 w-n2048-skewed $mpi $B gemm $N --rows 1,3,37,129,300,2000,5000,20000 --spread skewed --tile 192 --iters 3
r 0 w-flash-skewed $mpi $B gemm $F --rows 8,37,512,3000,20000,49152 --spread skewed --tile 192 --iters 3
r 0 w-pro-skewed $mpi $B gemm $P --rows 1000,30000,49152 --spread skewed --tile 192 --iters 3
r 0 zl-tiny-skewed $mpi build/zl/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile 128 --iters 3
r 0 zl-n2048-skewed $mpi build/zl/megamoe gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --tile 128 --iters 3
r 0 memcheck-wide $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm $N --rows 37,300,2000 --spread skewed --tile 192 --iters 1 --warmup 0
r 0 racecheck-wide $mpi compute-sanitizer --tool racecheck --report-api-errors no $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,37,300 --spread skewed --tile 192 --iters 1 --warmup 0
r 0 audit-wide $mpi build/audit/megamoe gemm $F --rows 8,4096,12288 --tile 192 --iters 3
r 4 stall-wide $mpi build/inject/megamoe gemm --config tests/configs/small-k512.json --ep 2 --rows 300 --tile 192 --iters 3
echo "OK rows: $(grep -hE '^gemm[12] ' /tmp/c-w-*.log /tmp/c-zl-*.log /tmp/c-memcheck*.log /tmp/c-audit*.log | grep -c ' OK ')  not OK: $(grep -hE '^gemm[12] ' /tmp/c-w-*.log /tmp/c-zl-*.log /tmp/c-memcheck*.log /tmp/c-audit*.log | grep -vc ' OK ')"
grep -h "ERROR SUMMARY" /tmp/c-memcheck-wide.log; grep -h "RACECHECK SUMMARY" /tmp/c-racecheck-wide.log
echo "racecheck outside the known class: $(scripts/racecheck-unknown.sh /tmp/c-racecheck-wide.log)"
grep -h "timed out\|TIMEOUT" /tmp/c-stall-*.log | head -2
echo "tests $((SECONDS-t0)) s"
bin_of() { case $1 in old) echo build/old-da13dba/build/megamoe;; zl) echo build/zl/megamoe;; *) echo build/megamoe;; esac; }
{
for order in "new old" "old new" "new old" "old new"; do
  for b in $order; do
    bin=$(bin_of $b)
    echo "== $b flash"; timeout 100 $mpi $bin gemm $F --rows 12288,49152 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== $b pro"; timeout 100 $mpi $bin gemm $P --rows 49152 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
echo "ab $((SECONDS-t0)) s"
{
for order in "zl new" "new zl" "zl new"; do
  for b in $order; do
    bin=$(bin_of $b)
    echo "== $b flash t128"; timeout 100 $mpi $bin gemm $F --rows 64,512,4096 --tile 128 --iters 20 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== $b pro t128"; timeout 100 $mpi $bin gemm $P --rows 4096,49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
} > $OUT/zl.txt 2>&1
(cd /tmp && tar czf $OUT/logs.tgz c-*.log)
echo "total $((SECONDS-t0)) s"
