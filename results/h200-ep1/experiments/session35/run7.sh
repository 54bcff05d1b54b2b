# Session 35, call 7: the final host code (two small edits after call 4's gpu-check: the energy
# loop's first sample zeroed, the flag's help) on gpu-check's gemm-energy step and the tiny
# shapes with 200 ms windows. One H200, carry [".deps"], ~1 min:
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session35/run7.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
mpi="mpirun --bind-to none -np 1"
lab_run 0 gemm-energy $mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 64,49152 --iters 3 --energy-ms 500
echo "both readings: $(grep -c '^energy gemm[12] .*ours [0-9.]* J/call.*cuBLASLt [0-9.]* J/call' $LAB_LOGS/gemm-energy.log) of 4"
lab_run 0 tiny-energy $mpi build/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,37,200,3000 --spread skewed --energy-ms 200 --iters 3
lab_run 2 short-window $mpi build/megamoe gemm --config configs/tiny.json --energy-ms 100
lab_ok_rows
grep -h '^energy\|error' $LAB_LOGS/*.log | cut -c1-200
cp $LAB_LOGS/*.log $OUT/
echo "total $((SECONDS-t0)) s"
