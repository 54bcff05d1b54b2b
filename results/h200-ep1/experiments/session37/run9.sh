#!/bin/bash
# Session 37, call 9 (the last of the device budget): the final tree (lean wide K loop by default)
# through gpu-check's GEMM steps: every ragged / wide / prefix / banded gemm row, then `check` on
# one GPU and the Flash and Pro EP8 gemm tables with JSON. carry [".deps"]; logs into $OUT/call9.
set -u
. scripts/lab.sh
L=$OUT/call9; mkdir -p $L
t0=$SECONDS
lab_build $L || exit 1
echo "built in $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
grep -E '^expect_rc 0 gemm-(tiny|k512|h640|prefix|n2048|flash-skewed)' scripts/gpu-check.sh | sed 's/^expect_rc 0 //' |
while read -r name cmd; do
    cmd=${cmd//\$mpi/mpirun --bind-to none}
    lab_run 0 $name bash -c "$cmd" > /dev/null < /dev/null
    echo "$name rc=$? $(grep -cE '^gemm[12] .* OK ' $LAB_LOGS/$name.log) of $(grep -cE '^gemm[12] ' $LAB_LOGS/$name.log) rows OK"
done | tee $L/gemm-rows.txt
lab_run 0 check-np1 $mpi build/megamoe check --json $L/check-ep1.json; tail -2 $LAB_LOGS/check-np1.log
lab_run 0 gemm-flash-ep8 $mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,64,512,4096,12288,49152 --iters 10 --json $L/gemm-deepseek-v4-flash-ep8.json
lab_run 0 gemm-pro-ep8 $mpi build/megamoe gemm --config configs/deepseek-v4-pro.json --ep 8 --iters 10 --json $L/gemm-deepseek-v4-pro-ep8.json
grep -hE '^gemm[12] ' $LAB_LOGS/gemm-flash-ep8.log $LAB_LOGS/gemm-pro-ep8.log
cp $LAB_LOGS/gemm-flash-ep8.log $L/gemm-deepseek-v4-flash-ep8.txt; cp $LAB_LOGS/gemm-pro-ep8.log $L/gemm-deepseek-v4-pro-ep8.txt
tar czf $OUT/call9.tgz -C $OUT call9 && tar czf $OUT/run9-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
