#!/bin/bash
# Prepared for the next session (not run in the thirty-ninth: no device time left). Which step makes
# every item's first K block late (calls 4 and 6: the math waits there for its scale slot and its
# stage, ~5% of the samples from 1 block in 32; call 7: an L2 prefetch of the next item does not
# help)? The wide kernel's item trace (-DMM_WIDE_TRACE=1, kernels/gemm.cu: SM cycles an item of
# each producer and math step, and each block's issue-to-ready time for block 0 and block
# kblocks / 2), printed by `gemm` as a `# wide trace` line per row. Flash and Pro at 12288 and
# 49152 rows (--tile 192), then main against the trace build x 2 (what the stamps cost).
# Reading it: block 0's issue->ready against the mid block's says whether its loads are slower;
# "issued ... before the math asked" against the mid block's says whether they are issued later
# (then locate+publish, the slot and block 0's free stage say which producer step takes the time).
# One H200, carry [".deps"]:  GIT_REV=<rev> bash results/h200-ep1/experiments/session39/run8.sh
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant trace "-DMM_WIDE_TRACE=1"
lab_wait_variants || exit 1
echo "built in $((SECONDS - t0)) s"
for m in flash pro; do
    lab_run 0 trace-$m build/trace/megamoe gemm --config configs/deepseek-v4-$m.json --ep 8 --rows 12288,49152 --iters 10 --tile 192
    grep -E "^# wide trace|^gemm[12] " "$LAB_LOGS/trace-$m.log" | cut -c1-400
done
lab_rounds 2 "main trace" flash gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 10 --tile 192
lab_ok_rows
lab_pack $OUT
echo "total $((SECONDS - t0)) s"
