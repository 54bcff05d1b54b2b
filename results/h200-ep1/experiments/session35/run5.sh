# Session 35, call 5: the energy files of the final code (gemm --energy-ms 1000, every case timed
# first, then each case's windows): Flash at EP8 over the lab's row counts and Pro at its default
# rows, ours and cuBLASLt. One H200, carry [".deps"], ~2.5 min:
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session35/run5.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
mpi="mpirun --bind-to none -np 1"
lab_run 0 flash $mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,64,512,4096,12288,49152 --iters 10 --energy-ms 1000 --json $OUT/gemm-energy-deepseek-v4-flash-ep8.json
lab_run 0 pro $mpi build/megamoe gemm --config configs/deepseek-v4-pro.json --ep 8 --iters 10 --energy-ms 1000 --json $OUT/gemm-energy-deepseek-v4-pro-ep8.json
cp $LAB_LOGS/flash.log $OUT/gemm-energy-deepseek-v4-flash-ep8.txt
cp $LAB_LOGS/pro.log $OUT/gemm-energy-deepseek-v4-pro-ep8.txt
lab_ok_rows
grep -h '^energy' $LAB_LOGS/*.log | cut -c1-230
echo "total $((SECONDS-t0)) s"
