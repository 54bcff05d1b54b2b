#!/usr/bin/env bash
# The lab tools' CPU-side tests, run by `make test` (cheap: no GPU, no build of the product):
# the A/B runner, the side-by-side runner and its table, the experiment helpers, the ablation
# runner's edits, the ncu stall table, and the probes still compiling against the kernels'
# headers. NVCC: the compiler (default: CUDA_HOME's).
set -u
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
fail=0
lab/tests/test_ab.sh || fail=1
lab/tests/test_side.sh || fail=1
lab/tests/test_lab.sh || fail=1
lab/tests/test_ablate.sh || fail=1
out=$(python3 lab/ncu-stalls.py lab/tests/sass-sample.csv 2)
if ! echo "$out" | grep -q "by reason: long_sb=58.0, barrier=28.0, wait=14.0" ||
   ! echo "$out" | grep -q "^00020  60.0% ex=      4000 @P0   BRA" || [ "$(echo "$out" | wc -l)" -ne 4 ]; then
    echo "FAIL: ncu-stalls.py on the sample"; echo "$out"; fail=1
fi
# what ptxas says of the probes is theirs to report (rs_tile_probe's rspipe step is serialized)
for probe in lab/probes/*_probe.cu; do
    out=$("$NVCC" -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -c "$probe" -o /dev/null 2>&1) ||
        { echo "FAIL: $probe does not compile"; echo "$out" | tail -5; fail=1; }
done
# each experiment waiting in lab/pending still applies to the tree it will be measured against,
# and its call script parses
for patch in lab/pending/*.patch; do
    [ -e "$patch" ] || continue
    git apply --check "$patch" 2>/dev/null || { echo "FAIL: $patch no longer applies"; fail=1; }
done
for script in lab/pending/*.sh; do
    [ -e "$script" ] || continue
    bash -n "$script" || { echo "FAIL: $script does not parse"; fail=1; }
done
[ $fail -eq 0 ] && echo "lab tests: ab.sh, side.sh, lab.sh, ablate.sh, ncu-stalls.py, the probes and lab/pending as documented"
exit $fail
