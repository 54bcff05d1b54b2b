set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
make -j16 CJSON_HOME=$PWD/.deps/usr > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
M="mpirun --bind-to none -np 1 build/megamoe gemm"
r() { local n=$1; shift; echo "== $n: $*" ; timeout 200 "$@" > $OUT/$n.txt 2>&1; echo "rc=$?"; tail -n +1 $OUT/$n.txt | grep -E "^gemm[12] |FAIL|TIMEOUT|rror" | head -40; }
r tiny-skewed-192 $M --config configs/tiny.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile 192 --iters 3
r tiny-routing-192 $M --config configs/tiny.json --ep 2 --rows 1,37,300,2000 --spread routing --routing rank-skew:0.9 --tile 192 --iters 3
r flash-128 $M --config configs/deepseek-v4-flash.json --ep 8 --rows 512,4096,12288,24576,49152 --tile 128 --iters 10
r flash-192 $M --config configs/deepseek-v4-flash.json --ep 8 --rows 512,4096,12288,24576,49152 --tile 192 --iters 10
r pro-128 $M --config configs/deepseek-v4-pro.json --ep 8 --rows 4096,24576,49152 --tile 128 --iters 10
r pro-192 $M --config configs/deepseek-v4-pro.json --ep 8 --rows 4096,24576,49152 --tile 192 --iters 10
r memcheck-192 mpirun --bind-to none -np 1 compute-sanitizer --tool memcheck --error-exitcode 9 build/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,37,300 --spread skewed --tile 192 --iters 1 --warmup 0
r racecheck-192 mpirun --bind-to none -np 1 compute-sanitizer --tool racecheck --error-exitcode 9 build/megamoe gemm --config configs/tiny.json --ep 2 --rows 300 --spread skewed --tile 192 --iters 1 --warmup 0
