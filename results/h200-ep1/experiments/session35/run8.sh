# Session 35, call 8: `bench --energy-ms` (each timed (mode, batch) row's calls back to back after
# the sweep, ranks lined up, NVML on each rank's GPU, summed to rank 0) and the energy loop it
# now shares with gemm (timing.c's timing_energy_loop). One H200, carry [".deps"], ~1.5 min:
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session35/run8.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
mpi="mpirun --bind-to none -np 1"
lab_run 0 gemm-energy $mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 64,49152 --iters 3 --energy-ms 500
echo "gemm, both readings: $(grep -c '^energy gemm[12] .*ours [0-9.]* J/call.*cuBLASLt [0-9.]* J/call' $LAB_LOGS/gemm-energy.log) of 4"
lab_run 0 bench-energy $mpi build/megamoe bench --config configs/deepseek-v4-flash.json --batches 1,64,4096 --iters 10 --energy-ms 1000 --json $OUT/bench-energy-flash-ep1.json
sed -n '/^## energy/,$p' $LAB_LOGS/bench-energy.log
grep -h 'error\|warning' $LAB_LOGS/*.log | head
cp $LAB_LOGS/*.log $OUT/
echo "total $((SECONDS-t0)) s"
