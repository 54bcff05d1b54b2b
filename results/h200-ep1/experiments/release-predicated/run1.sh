# Prepared in the thirtieth session, not yet run: the stage release as predicated PTX
# (-DMM_RELEASE_PREDICATED=1) against the default, which branches around lane 0's arrivals in the
# core's 128 x 128 consume and in fused (the wide form got 2-4% when ptxas happened to predicate
# it). One H200, carry [".deps"]; ~7 min. Correctness of the new build first (its ring audit
# build keeps the branch: MM_RING_AUDIT takes the old path), then A/B with the order rotated.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C GIT_REV=${GIT_REV:-unknown} build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
for v in rp:-DMM_RELEASE_PREDICATED=1 rpinject:"-DMM_RELEASE_PREDICATED=1 -DMM_INJECT_STALL_MS=12000"; do
  b=${v%%:*}; f=${v#*:}
  mkdir -p build/$b && cp -a build/src build/kernels build/$b/ && rm -f build/$b/kernels/*.o build/$b/megamoe
  (make -j8 $C BUILD=build/$b NVEXTRA="$f" build/$b/megamoe > $OUT/build-$b.log 2>&1) &
done
wait
for x in build/rp/megamoe build/rpinject/megamoe; do [ -x $x ] || { echo "build $x failed"; tail -20 $OUT/build-*.log; exit 1; }; done
echo "builds $((SECONDS-t0)) s"
r() { local want=$1 n=$2; shift 2; local t=$SECONDS; timeout 150 "$@" > /tmp/c-$n.log 2>&1; local rc=$?; printf '%-30s rc=%-3d want %d %4ds\n' $n $rc $want $((SECONDS-t)); }
F="--config configs/deepseek-v4-flash.json --ep 8"
P="--config configs/deepseek-v4-pro.json --ep 8"
N="--config tests/configs/small-n2048.json --ep 2"
B=build/rp/megamoe
for t in 128 192; do
  r 0 t$t-tiny-skewed $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile $t --iters 3
  r 0 t$t-k512-skewed $mpi $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile $t --iters 3
  r 0 t$t-n2048-skewed $mpi $B gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --tile $t --iters 3
  r 0 t$t-flash-skewed $mpi $B gemm $F --rows 8,37,512,3000,20000 --spread skewed --tile $t --iters 3
done
r 0 memcheck-n2048 $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm $N --rows 3,37,300,2000 --spread skewed --tile 128 --iters 1 --warmup 0
r 4 stall-pairs $mpi build/rpinject/megamoe gemm $N --rows 2000 --tile 128 --iters 3
r 4 stall-fused $mpi build/rpinject/megamoe check --filter smoke --modes fused --timeout-ms 60000
r 0 check-np1 $mpi $B check
echo "OK rows: $(grep -hE '^gemm[12] ' /tmp/c-t*.log /tmp/c-memcheck*.log | grep -c ' OK ')  not OK: $(grep -hE '^gemm[12] ' /tmp/c-t*.log /tmp/c-memcheck*.log | grep -vc ' OK ')"
grep -h "ERROR SUMMARY" /tmp/c-memcheck-n2048.log; tail -3 /tmp/c-check-np1.log
echo "tests $((SECONDS-t0)) s"
bin_of() { case $1 in rp) echo build/rp/megamoe;; *) echo build/megamoe;; esac; }
{
for order in "rp def" "def rp" "rp def"; do
  for b in $order; do
    bin=$(bin_of $b)
    echo "== $b flash t128"; timeout 60 $mpi $bin gemm $F --rows 64,512,4096 --tile 128 --iters 20 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== $b pro t128"; timeout 100 $mpi $bin gemm $P --rows 512,4096,49152 --tile 128 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== $b wide"; timeout 100 $mpi $bin gemm $P --rows 49152 --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== $b bench"; timeout 100 $mpi $bin bench --config configs/deepseek-v4-flash.json --batches 1,8,64,512,4096 --modes fused,ll,normal --iters 20 2>&1 | grep -E "median|rror|TIMEOUT"
  done
done
} > $OUT/ab.txt 2>&1
(cd /tmp && tar czf $OUT/logs.tgz c-*.log)
echo "total $((SECONDS-t0)) s"
