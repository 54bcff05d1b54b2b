#!/bin/bash
# Session 37, call 10: run9's ragged gemm rows again (in call 9 mpirun read the loop's input, so only
# the first row ran; fixed there with < /dev/null). carry [".deps"]; logs into $OUT/call10.
set -u
. scripts/lab.sh
L=$OUT/call10; mkdir -p $L
lab_build $L || exit 1
grep -E '^expect_rc 0 gemm-(tiny|k512|h640|prefix|n2048|flash-skewed)' scripts/gpu-check.sh | sed 's/^expect_rc 0 //' |
while read -r name cmd; do
    cmd=${cmd//\$mpi/mpirun --bind-to none}
    lab_run 0 $name bash -c "$cmd" > /dev/null < /dev/null
    echo "$name rc=$? $(grep -cE '^gemm[12] .* OK ' $LAB_LOGS/$name.log) of $(grep -cE '^gemm[12] ' $LAB_LOGS/$name.log) rows OK"
done | tee $L/gemm-rows.txt
tar czf $OUT/run10-logs.tgz -C $LAB_LOGS .
