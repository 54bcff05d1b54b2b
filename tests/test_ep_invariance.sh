#!/usr/bin/env bash
# scripts/ep-invariance.py on fixture check files: same digests pass, a changed digest fails,
# runs with different seeds or nothing comparable are refused.
set -u
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
d=tests/ep-invariance
fail=0
expect() { # rc, args...
    local want=$1; shift
    $py scripts/ep-invariance.py "$@" >/dev/null 2>&1
    local rc=$?
    if [ "$rc" -ne "$want" ]; then echo "FAIL: ep-invariance $* -> rc $rc, expected $want"; fail=1; fi
}
expect 0 $d/ep1.json $d/ep2.json
# normal's per-rank partial sums change its bits with the EP size: listed, never a failure
expect 0 $d/ep1-normal.json $d/ep2-normal-differs.json
expect 1 $d/ep1.json $d/ep2-differs.json
expect 2 $d/ep1.json $d/ep2-seed2.json
expect 2 $d/ep1.json
expect 2 $d/ep1.json $d/missing.json
out=$($py scripts/ep-invariance.py $d/ep1.json $d/ep2-differs.json)
echo "$out" | grep -q "route-uniform.*ll.*DIFFER" || { echo "FAIL: the differing output is not named"; fail=1; }
out=$($py scripts/ep-invariance.py $d/ep1-normal.json $d/ep2-normal-differs.json)
echo "$out" | grep -q "route-uniform.*normal.*not compared" || { echo "FAIL: normal is not listed as not compared"; fail=1; }
[ $fail -eq 0 ] && echo "ep-invariance script: all cases pass"
exit $fail
