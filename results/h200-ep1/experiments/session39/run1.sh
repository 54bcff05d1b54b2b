#!/bin/bash
# Call 1 of the thirty-ninth session: gpu-check without the tools on the template kernel (check,
# bench, the modes, the headline gemm tables with --wide-scales auto), then the probe's step plain
# and as 2-CTA clusters (session38/run7.sh, prepared last session).
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session39/run1.sh   (carry .deps)
set -u
OUT=${OUT:-/tmp/out}
GIT_REV=${GIT_REV:-unknown} GPU_CHECK_TOOLS=0 bash scripts/gpu-check.sh /tmp/gc > "$OUT/gc-summary.txt" 2>&1
echo "gpu-check rc=$?" >> "$OUT/gc-summary.txt"
tar czf "$OUT/gc.tgz" -C /tmp/gc --exclude gpu-check-logs.tgz .
bash results/h200-ep1/experiments/session38/run7.sh > "$OUT/run7-console.txt" 2>&1
