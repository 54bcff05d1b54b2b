# the final code's gemm steps of gpu-check (the EP1 headline gemm files)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
make -j16 CJSON_HOME=$PWD/.deps/usr > $OUT/build.log 2>&1 || { tail $OUT/build.log; exit 1; }
mpi="mpirun --bind-to none -np 1 build/megamoe gemm"
r() { local n=$1; shift; timeout 150 "$@" > $OUT/$n.txt 2>&1; echo "$n rc=$?"; }
r gemm-tiny-skewed $mpi --config configs/tiny.json --ep 2 --rows 1,3,37,129,300 --spread skewed --iters 3
r gemm-tiny-skewed-wide $mpi --config configs/tiny.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile 192 --iters 3
r gemm-k512-skewed-wide $mpi --config tests/configs/small-k512.json --ep 2 --rows 1,3,37,129,300,2000 --spread skewed --tile 192 --iters 3
r gemm-deepseek-v4-flash-ep8 $mpi --config configs/deepseek-v4-flash.json --ep 8 --rows 8,64,512,4096,12288,49152 --iters 10
r gemm-deepseek-v4-pro-ep8 $mpi --config configs/deepseek-v4-pro.json --ep 8 --iters 10
grep -h "FAIL" $OUT/*.txt | head -5
grep -hE "^gemm[12] " $OUT/gemm-deepseek-*.txt
