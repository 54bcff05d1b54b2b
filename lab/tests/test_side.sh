#!/usr/bin/env bash
# lab/side.sh's CPU-side behaviour: usage errors exit 2, `--dry-run` lists both sides' commands with
# the first side alternating between rounds and each side's flags; lab/side-ratios.py's table
# from results files (ratios per round, their median and range, a row that failed on one side).
# (The runs themselves need GPUs: gpu machines only.)
set -u
cd "$(dirname "$0")/../.." || exit 1
pass=0 fail=0
out=/tmp/test_side.$$.out
expect() { # rc, name, command...
    local want=$1 name=$2; shift 2
    "$@" >"$out" 2>&1; local rc=$?
    if [ "$rc" -eq "$want" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name: rc=$rc, want $want"; cat "$out"; fi
}
check() { # name, condition command...
    local name=$1; shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name"; cat "$out"; fi
}
expect 2 no-args lab/side.sh
expect 2 option-first lab/side.sh --dry-run
expect 2 unknown-option lab/side.sh build/side-test --bogus x
check unknown-option-message grep -q "unknown option --bogus" "$out"
expect 2 same-names lab/side.sh build/side-test --names a,a --dry-run
expect 2 one-name lab/side.sh build/side-test --names a --dry-run
expect 2 bad-rounds lab/side.sh build/side-test --rounds 0 --dry-run
expect 2 no-value lab/side.sh build/side-test --rounds
expect 0 dry-run lab/side.sh build/side-test --configs deepseek-v4-pro --batches 8,64 --rounds 3 --iters 10 \
    --bench-extra "--ep-slice 8" --dry-run
check dry-run-order test "$(cut -d: -f1 "$out" | tr '\n' ' ')" = "fp8 fp4 fp4 fp8 fp8 fp4 "
check dry-run-flags test "$(grep -c 'bench --config configs/deepseek-v4-pro.json --modes fused --batches 8,64 --iters 10 --ep-slice 8 --weights fp' "$out")" = 6
check dry-run-files grep -q "^fp4: .*--weights fp4 --json build/side-test/deepseek-v4-pro-fp4-2.json$" "$out"
expect 0 dry-run-named lab/side.sh build/side-test --a "--graph off" --b "--graph on" --names eager,graph --rounds 1 --dry-run
check dry-run-named-flags test "$(grep -c -- '--graph on --json build/side-test/deepseek-v4-flash-graph-1.json$' "$out")" = 1
# the table from results files: A 100 / 120 us and B 50 / 40 at batch 8 (ratios 2.0 and 3.0), B
# failed at batch 64 in round 2
dir=$(mktemp -d)
row() { # batch, status, median
    printf '{"mode": "fused", "batch": %s, "status": "%s", "time": {"median_us": %s}}' "$1" "$2" "$3"
}
doc() { printf '{"schema": "megamoe.results/1", "results": [%s, %s]}' "$1" "$2"; }
doc "$(row 8 OK 100.0)" "$(row 64 OK 300.0)" >"$dir/cfg-x-1.json"
doc "$(row 8 OK 120.0)" "$(row 64 OK 310.0)" >"$dir/cfg-x-2.json"
doc "$(row 8 OK 50.0)" "$(row 64 OK 150.0)" >"$dir/cfg-y-1.json"
doc "$(row 8 OK 40.0)" "$(row 64 FAIL 0)" >"$dir/cfg-y-2.json"
echo '{"results": []}' >"$dir/other-z-1.json" # another side's file: not read
expect 0 ratios python3 lab/side-ratios.py "$dir" x y
check ratios-batch8 grep -Eq "^cfg +fused +8  100.0, 120.0 +50.0, 40.0 +2.50x \(2.00-3.00\)$" "$out"
check ratios-batch64 grep -Eq "^cfg +fused +64  300.0, 310.0 +150.0, FAIL +2.00x$" "$out"
check ratios-rows test "$(wc -l <"$out")" = 3
expect 1 ratios-none python3 lab/side-ratios.py "$dir" p q
expect 2 ratios-usage python3 lab/side-ratios.py "$dir" x x
rm -rf "$dir" "$out"
echo "test_side.sh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
