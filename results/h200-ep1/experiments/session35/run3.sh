# Session 35, call 3: `gemm --energy-ms` in its final shape: every case timed first, then each
# case's energy windows (so no timing follows a sustained load: in calls 1-2 the windows ran right
# after each case and the next case's timing followed ~2.6 s of back-to-back load). Checks that
# timing with and without the flag agree (A / B / A / B), the energy lines on Flash and Pro, and
# the small shapes (tiny, skewed, experts without rows) with the shortest window. One H200, carry
# [".deps"], ~3 min:
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session35/run3.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
echo "built $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
flash="--config configs/deepseek-v4-flash.json --ep 8 --rows 8,4096,49152"
lab_run 0 tiny-energy $mpi build/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,37,200,3000 --spread skewed --energy-ms 200 --iters 3 --json $OUT/tiny-energy.json
lab_run 0 flash-plain-1 $mpi build/megamoe gemm $flash
lab_run 0 flash-energy-1 $mpi build/megamoe gemm $flash --energy-ms 1000 --json $OUT/flash-energy.json
lab_run 0 flash-plain-2 $mpi build/megamoe gemm $flash
lab_run 0 flash-energy-2 $mpi build/megamoe gemm $flash --energy-ms 1000
lab_run 0 pro-energy $mpi build/megamoe gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 64,49152 --energy-ms 1000 --json $OUT/pro-energy.json
lab_ok_rows
for f in $LAB_LOGS/*.log; do
    echo "== $(basename $f .log)"
    grep -E '^gemm[12] |^energy|^# energy|warning|error' $f | cut -c1-250
done | tee $OUT/summary.txt
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
