#!/usr/bin/env bash
# scripts/racecheck-unknown.sh (gpu-check's judge of racecheck on the GEMM core) on two logs: the
# known class only (cp.async scale writes against the math's reads, cuBLASLt's own kernels) counts
# 0; two reports outside it (an epilogue write, a plain write in the wide kernel) count 2; of two
# reports with unnamed sites, the one with a cuBLASLt report's access kinds and hazard counts is
# not counted, the other is (1); a missing file is a usage error.
set -u
cd "$(dirname "$0")/.."
fail=0
check() { # expected output, log
    local got
    got=$(scripts/racecheck-unknown.sh "$2")
    [ "$got" = "$1" ] || { echo "FAIL: racecheck-unknown $2: $got, expected $1"; fail=1; }
}
check 0 tests/racecheck/known.log
check 2 tests/racecheck/unknown.log
check 1 tests/racecheck/unnamed.log
scripts/racecheck-unknown.sh tests/racecheck/none.log 2>/dev/null
[ $? -eq 2 ] || { echo "FAIL: racecheck-unknown on a missing log: not a usage error"; fail=1; }
[ $fail -eq 0 ] && echo "racecheck-unknown: known class 0, others counted"
exit $fail
