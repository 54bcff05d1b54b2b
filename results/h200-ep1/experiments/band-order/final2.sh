# after the give-up fix (no loads once a wait of the CTA expired): the injected stalls in every
# form (pairs over K past the ring: failed in call 8 with a launch failure), ragged rows, and the
# EP1 headline gemm files of the final code
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
mpi="mpirun --bind-to none -np 1"
t0=$SECONDS
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
make -j16 $C inject > $OUT/build-inject.log 2>&1 &
r() { local want=$1 n=$2; shift 2; local t=$SECONDS; timeout 100 "$@" > $OUT/$n.txt 2>&1; local rc=$?; printf '%-34s rc=%-3d want %d %4ds\n' $n $rc $want $((SECONDS-t)); }
N="--config tests/configs/small-n2048.json --ep 2"
r 0 gemm-n2048-skewed $mpi build/megamoe gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --iters 3
r 0 gemm-n2048-skewed-wide $mpi build/megamoe gemm $N --rows 1,3,37,129,300,2000,5000 --spread skewed --tile 192 --iters 3
grep -hE "^gemm[12] " $OUT/gemm-n2048-*.txt | grep -c " OK "; grep -hE "^gemm[12] " $OUT/gemm-n2048-*.txt | grep -v " OK " | head -3
r 0 gemm-deepseek-v4-flash-ep8 $mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,64,512,4096,12288,49152 --iters 10
r 0 gemm-deepseek-v4-pro-ep8 $mpi build/megamoe gemm --config configs/deepseek-v4-pro.json --ep 8 --iters 10
grep -hE "^gemm[12] " $OUT/gemm-deepseek-*.txt
wait
echo "inject build done $((SECONDS-t0)) s"
r 4 stall-pairs $mpi build/inject/megamoe gemm $N --rows 300 --iters 3
r 4 stall-tiny $mpi build/inject/megamoe gemm --config configs/tiny.json --ep 2 --rows 37 --iters 3
r 4 stall-wide $mpi build/inject/megamoe gemm --config tests/configs/small-k512.json --ep 2 --rows 300 --tile 192 --iters 3
grep -h "timed out\|rror" $OUT/stall-*.txt | head
r 4 stall-ll $mpi build/inject/megamoe check --filter smoke --modes ll --timeout-ms 60000
grep -h "timed out" $OUT/stall-ll.txt | head -2
echo "total $((SECONDS-t0)) s"
