#!/usr/bin/env bash
# The gate's verdicts and exit codes on the fixture pairs in tests/gate/.
set -u
bin=${1:-build/megamoe}
g=tests/gate
pass=0 fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# check NAME WANT_RC PATTERN -- gate args...
check() {
    local name=$1 want=$2 pattern=$3; shift 4
    "$bin" gate "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$rc" -ne "$want" ] || ! grep -Eq -- "$pattern" "$tmp/out" "$tmp/err"; then
        echo "FAIL: $name: rc=$rc (want $want), pattern '$pattern'"; sed 's/^/    /' "$tmp/out" "$tmp/err" | head -20
        fail=$((fail + 1))
    else
        pass=$((pass + 1))
    fi
}
check identical 0 "gate: PASS: 7 rows: 7 same" -- --baseline $g/base.json --current $g/identical.json
check slower10 1 "fused/64 .* \+10\.[0-9]%  SLOWER \(fails\)" -- --baseline $g/base.json --current $g/slower10.json
check slower10-allowed 0 "gate: PASS: .* 6 slower" -- --baseline $g/base.json --current $g/slower10.json --max-slowdown 15%
check faster10 0 "gate: PASS: .* 6 faster" -- --baseline $g/base.json --current $g/faster10.json
check noisy 0 "gate: PASS: 7 rows: .* 0 faster, 0 slower, [0-9]+ unsure, 0 missing" -- --baseline $g/noisy-a.json --current $g/noisy-b.json
check failing 1 "BROKEN \(fails\): FAIL calc_diff" -- --baseline $g/base.json --current $g/failing.json
check missing 1 "fused/4096 .*MISSING \(fails\)" -- --baseline $g/base.json --current $g/missing.json
check other-gpu 2 "baseline ran on NVIDIA H200 at EP 2, current on NVIDIA H100" -- --baseline $g/base.json --current $g/other-gpu.json
check other-gpu-ignored 0 "gate: PASS" -- --baseline $g/base.json --current $g/other-gpu.json --ignore-device
check timing-method 0 "gate: the baseline timed its modes one after another, the current run side by side" -- --baseline $g/base.json --current $g/interleaved.json
check idle-method 0 "gate: the baseline idled the GPU 0 ms before each call, the current run 10 ms" -- --baseline $g/base.json --current $g/idled.json
# --relative-to: a whole run 4% off (every mode, shared per-round factors) fails the absolute gate
# and passes the relative one; fused 8% slower against normal fails both
check drift-absolute 1 "normal/64 .* \+3\.[0-9]%  SLOWER \(fails\)" -- --baseline $g/rounds-base.json --current $g/rounds-drift4.json --max-slowdown 3%
check drift-relative 0 "fused/64 +0\.33[0-9]+x +0\.33[0-9]+x .* SAME$" -- --baseline $g/rounds-base.json --current $g/rounds-drift4.json --max-slowdown 3% --relative-to normal
check drift-reference 0 "normal/64 .* SLOWER \(reference\)" -- --baseline $g/rounds-base.json --current $g/rounds-drift4.json --max-slowdown 3% --relative-to normal
check fused8-relative 1 "fused/4096 .* \+8\.0%  SLOWER \(fails\)" -- --baseline $g/rounds-base.json --current $g/rounds-fused8.json --relative-to normal
check relative-unpaired 0 "gate: PASS: 7 rows: 4 same, 0 faster, 3 slower.*relative to normal" -- --baseline $g/base.json --current $g/slower10.json --relative-to normal
check relative-no-ref 2 "has no timed ll row" -- --baseline $g/base.json --current $g/base.json --relative-to ll
check relative-bad-mode 2 "unknown reference 'turbo' \(choose from fused, normal, ll, cublaslt\)" -- --baseline $g/base.json --current $g/base.json --relative-to turbo
check relative-list 2 "one mode, not a list" -- --baseline $g/base.json --current $g/base.json --relative-to fused,normal
# gemm --json files: the whole machine 6% off fails absolutely and passes against the cuBLASLt loop
# timed beside each row; ours 8% slower fails both; bench's files have no cuBLASLt rows
check gemm-drift-absolute 1 "gemm1/49152 .* \+5\.[0-9]%  SLOWER \(fails\)" -- --baseline $g/gemm-base.json --current $g/gemm-drift6.json --max-slowdown 3%
check gemm-drift-relative 0 "gate: PASS: 8 rows: 4 same, 0 faster, 4 slower.*relative to cublaslt" -- --baseline $g/gemm-base.json --current $g/gemm-drift6.json --max-slowdown 3% --relative-to cublaslt
check gemm-ours8-relative 1 "gemm2/49152 .* \+8\.[0-9]%  SLOWER \(fails\)" -- --baseline $g/gemm-base.json --current $g/gemm-ours8.json --relative-to cublaslt
check gemm-relative-bench 2 "has no timed \*-cublaslt \(gemm --json\) row" -- --baseline $g/base.json --current $g/base.json --relative-to cublaslt
# a changed row shows its stages (both runs have them), a SAME row does not
check stages 1 "^ +stages \(us, not judged\): dispatch 40\.0 -> 40\.0 \(\+0\.0%\), gemm1 600\.0 -> 720\.0 \(\+20\.0%\), gemm2 300\.0 -> 300\.0" -- --baseline $g/stages-base.json --current $g/stages-slower.json
"$bin" gate --baseline $g/stages-base.json --current $g/stages-base.json >"$tmp/out" 2>&1
grep -q "stages" "$tmp/out" && { echo "FAIL: stages shown on SAME rows"; fail=$((fail + 1)); } || pass=$((pass + 1))
check other-schema 2 "schema 'megamoe.results/0'" -- --baseline $g/base.json --current $g/other-schema.json
check no-file 2 "cannot read" -- --baseline $g/nope.json --current $g/base.json
check not-json 2 "not valid JSON" -- --baseline tests/configs/not-json.json --current $g/base.json
check needs-both 2 "both required" -- --baseline $g/base.json
"$bin" gate --baseline $g/base.json --current $g/slower10.json --markdown "$tmp/gate.md" >/dev/null 2>&1
grep -q "| fused/1 | " "$tmp/gate.md" && grep -q "SLOWER (fails)" "$tmp/gate.md" \
    && pass=$((pass + 1)) || { echo "FAIL: markdown"; fail=$((fail + 1)); }
"$bin" gate --baseline $g/stages-base.json --current $g/stages-slower.json --markdown "$tmp/stages.md" >/dev/null 2>&1
grep -q "SLOWER (fails)<br>stages: dispatch 40.0 -> 40.0" "$tmp/stages.md" \
    && pass=$((pass + 1)) || { echo "FAIL: markdown stages"; fail=$((fail + 1)); }
# A gate must not pass what it cannot read: each file below is base.json or slower10.json with one
# thing wrong, written by mutate FILE OUT PYTHON (the statement edits `d`, the parsed file; an
# infinity is written as 1e999, which C's parsers read as one).
mutate() {
    python3 -c "import json, sys
d = json.load(open(sys.argv[1]))
$3
open(sys.argv[2], 'w').write(json.dumps(d).replace('Infinity', '1e999'))" "$1" "$2"
}
mutate $g/base.json "$tmp/iter-strings.json" "d['results'][0]['iter_us'][3] = 'fast'"
check iter-strings 2 "iter-strings.json: results\[0\] \(fused/1\): iter_us\[3\] must be a finite positive number" -- --baseline $g/base.json --current "$tmp/iter-strings.json"
mutate $g/base.json "$tmp/iter-negative.json" "d['results'][1]['iter_us'][0] = -4.0"
check iter-negative 2 "results\[1\] .*iter_us\[0\] must be a finite positive" -- --baseline $g/base.json --current "$tmp/iter-negative.json"
mutate $g/base.json "$tmp/iter-inf.json" "d['results'][2]['iter_us'][1] = 1e999"
check iter-inf 2 "results\[2\] .*iter_us\[1\] must be a finite positive" -- --baseline $g/base.json --current "$tmp/iter-inf.json"
mutate $g/base.json "$tmp/iter-empty.json" "d['results'][0]['iter_us'] = []"
check iter-empty 2 "iter_us must be a non-empty list" -- --baseline $g/base.json --current "$tmp/iter-empty.json"
mutate $g/base.json "$tmp/median-bad.json" "d['results'][0]['time']['median_us'] = 'x'"
check median-bad 2 "time.median_us must be a finite positive number" -- --baseline "$tmp/median-bad.json" --current $g/base.json
mutate $g/base.json "$tmp/no-rows.json" "d['results'] = []"
check baseline-no-rows 2 "no-rows.json: 'results' is empty" -- --baseline "$tmp/no-rows.json" --current $g/base.json
check current-no-rows 2 "no-rows.json: 'results' is empty" -- --baseline $g/base.json --current "$tmp/no-rows.json"
mutate $g/base.json "$tmp/duplicate.json" "d['results'].append(dict(d['results'][2]))"
check duplicate 2 "duplicate.json: results\[7\]: a second row for" -- --baseline $g/base.json --current "$tmp/duplicate.json"
mutate $g/base.json "$tmp/batch-text.json" "d['results'][0]['batch'] = '64'"
check batch-text 2 "results\[0\] lacks a mode, a whole non-negative batch" -- --baseline $g/base.json --current "$tmp/batch-text.json"
mutate $g/base.json "$tmp/pro.json" "d['meta']['config'] = 'deepseek-v4-pro'"
check other-config 2 "baseline is of config 'deepseek-v4-flash', current of 'deepseek-v4-pro'" -- --baseline $g/base.json --current "$tmp/pro.json"
check other-config-ignored 2 "no row can match" -- --baseline $g/base.json --current "$tmp/pro.json" --ignore-device
check min-gap-200 2 "--min-gap: 200 is out of range" -- --baseline $g/base.json --current $g/slower10.json --min-gap 200
check max-slowdown-80 2 "--max-slowdown: 80 is out of range" -- --baseline $g/base.json --current $g/slower10.json --max-slowdown 80%
check min-gap-above 2 "--min-gap 8% is above --max-slowdown 5%" -- --baseline $g/base.json --current $g/slower10.json --min-gap 8%
# an OK row whose recorded accuracy breaks the bound fails, whatever its status says
mutate $g/base.json "$tmp/ok-bad-diff.json" "r = d['results'][3]; r['diff'] = dict(r.get('diff') or {}, calc_diff=3e-4)"
check ok-bad-diff 1 "BROKEN \(fails\): OK status OK but calc_diff 0.0003 is above the bound 1e-04" -- --baseline $g/base.json --current "$tmp/ok-bad-diff.json"
check baseline-bad-diff 2 "calc_diff 0.0003 is above the bound 1e-04: not a baseline" -- --baseline "$tmp/ok-bad-diff.json" --current $g/base.json
mutate $g/base.json "$tmp/ok-nonfinite.json" "r = d['results'][0]; r['diff'] = dict(r.get('diff') or {}, calc_diff=1e-6, nonfinite=3)"
check ok-nonfinite 1 "BROKEN \(fails\): OK status OK but 3 outputs are not finite" -- --baseline $g/base.json --current "$tmp/ok-nonfinite.json"
# an emulated EP slice (bench --ep-slice) never matches a real run, nor a slice of another EP size
mutate $g/base.json "$tmp/slice8.json" "d['meta']['ep_slice'] = 8"
mutate $g/base.json "$tmp/slice4.json" "d['meta']['ep_slice'] = 4"
check slice-vs-real 2 "baseline is a real run, current an EP 8 slice: an emulated slice matches only a slice of the same EP size" -- --baseline $g/base.json --current "$tmp/slice8.json"
check slice-vs-real-ignored 2 "an emulated slice matches only" -- --baseline $g/base.json --current "$tmp/slice8.json" --ignore-device
check slice-vs-slice 2 "baseline is an EP 4 slice, current an EP 8 slice" -- --baseline "$tmp/slice4.json" --current "$tmp/slice8.json"
check slice-same 0 "gate: PASS" -- --baseline "$tmp/slice8.json" --current "$tmp/slice8.json"
# FP4 experts never match FP8 ones (a file without the key is FP8)
mutate $g/base.json "$tmp/fp4.json" "d['meta'].setdefault('shape', {})['weights'] = 'fp4'"
check fp4-vs-fp8 2 "gate: baseline has fp8 experts, current fp4: no row can match" -- --baseline $g/base.json --current "$tmp/fp4.json"
check fp4-same 0 "gate: PASS" -- --baseline "$tmp/fp4.json" --current "$tmp/fp4.json"
echo "test_gate.sh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
