# Session 35, call 2: run1.sh again with the samples on the energy counter's steps (call 1, at
# 08d71e8, sampled anywhere around a 1 s window and read 620-810 W on a 700 W board), plus Flash
# with 2 s windows. The joules of the GEMMs (gemm --energy-ms, NVML's energy counter and power-cap
# time over a back-to-back window per kernel after its timing): the reading at every Flash row
# count (and that the rows stay OK), then where
# the joules go at 49152 rows: the wide form against the 128 x 128 tiles and cuBLASLt's loop, and
# the two timing-only builds (loads alone, MM_WIDE_ABLATE=1; nothing stored, =2), and Pro.
# One H200, carry [".deps"], ~6 min:
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session35/run2.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant loads "-DMM_WIDE_ABLATE=1"
lab_variant nostore "-DMM_WIDE_ABLATE=2"
lab_wait_variants || exit 1
echo "built $((SECONDS-t0)) s"
nvidia-smi -q -d POWER,CLOCK > $OUT/smi-power.txt 2>&1
mpi="mpirun --bind-to none -np 1"
flash="--config configs/deepseek-v4-flash.json --ep 8"
lab_run 0 flash-all $mpi build/megamoe gemm $flash --rows 8,64,512,4096,12288,49152 --energy-ms 1000 --json $OUT/flash-energy.json
lab_run 0 flash-all-2 $mpi build/megamoe gemm $flash --rows 8,4096,49152 --energy-ms 2000
lab_run 0 flash-noenergy $mpi build/megamoe gemm $flash --rows 8,49152 --iters 5
for i in 1 2; do
    order="wide t128 loads nostore"; [ $i = 2 ] && order="nostore loads t128 wide"
    for b in $order; do
        case $b in
        wide) lab_run 0 big-$b-$i $mpi build/megamoe gemm $flash --rows 49152 --tile 192 --energy-ms 1000 ;;
        t128) lab_run 0 big-$b-$i $mpi build/megamoe gemm $flash --rows 49152 --tile 128 --energy-ms 1000 ;;
        *) lab_run 1 big-$b-$i $mpi build/$b/megamoe gemm $flash --rows 49152 --tile 192 --energy-ms 1000 ;;
        esac
    done
done
lab_run 0 pro $mpi build/megamoe gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 64,49152 --energy-ms 1000
lab_ok_rows
for f in $LAB_LOGS/*.log; do
    grep -q '^energy' $f || continue
    echo "== $(basename $f .log)"
    grep -E '^gemm[12] |^energy' $f
done | tee $OUT/energy.txt
grep -h 'warning\|error' $LAB_LOGS/*.log | sort | uniq -c | head -20
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
