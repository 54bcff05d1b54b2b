# Session 34, call 4: gemm with each row count's GEMM1 then GEMM2 (the order that keeps GEMM2's
# decode rows from following GEMM1's 49152): gpu-check's gemm steps as they stand (their files
# become the headline ones), then Flash EP8 twice more for the clocks of the decode rows.
# One H200, carry [".deps"], ~2 min:   GIT_REV=<rev> bash results/h200-ep1/experiments/session34/run4.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
logs=$LAB_LOGS
mpi="mpirun --bind-to none"
expect_rc() { local want=$1 name=$2; shift 2; lab_run "$want" "$name" "$@"; }
eval "$(sed -n '/^expect_rc 0 gemm-tiny-skewed /,/^expect_rc 0 gemm-pro-ep8 /p' scripts/gpu-check.sh | grep '^expect_rc')"
for i in 2 3; do
    lab_run 0 gemm-flash-ep8-$i $mpi -np 1 build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,64,512,4096,12288,49152 --iters 10
done
lab_ok_rows
cp $LAB_LOGS/*.json $OUT/
for f in $LAB_LOGS/gemm-flash-ep8*.log $LAB_LOGS/gemm-pro-ep8.log; do
    printf '%-18s %s\n' "$(basename $f .log)" "$(grep -E '^gemm[12] ' $f | awk '{printf "%s/%s %s us %s GB/s %s MHz | ", $1, $2, $9, $11, $15}')"
done | tee $OUT/clocks.txt
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
