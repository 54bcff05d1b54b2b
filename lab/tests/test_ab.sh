#!/usr/bin/env bash
# lab/ab.sh's CPU-side behaviour: usage errors exit 2, `prepare` puts a revision's tree in
# build/ab-old with its name, an unknown revision exits 2, `new-dir` names the new side's build
# folder per flag set, `run --dry-run` lists the timed commands
# with the first side alternating between rounds, `gemm` ones with --gemm. (The rest of `run`
# needs GPUs: gpu machines only.)
set -u
cd "$(dirname "$0")/../.." || exit 1
pass=0 fail=0
expect() { # rc, name, command...
    local want=$1 name=$2; shift 2
    "$@" >/tmp/test_ab.$$.out 2>&1; local rc=$?
    if [ "$rc" -eq "$want" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name: rc=$rc, want $want"; cat /tmp/test_ab.$$.out; fi
}
expect 2 no-args lab/ab.sh
expect 2 unknown-command lab/ab.sh compare
expect 2 unknown-option lab/ab.sh run build/ab-test --bogus
grep -q "unknown option --bogus" /tmp/test_ab.$$.out || { fail=$((fail + 1)); echo "FAIL unknown-option: no message"; }
expect 2 bad-revision lab/ab.sh prepare no-such-revision-xyz
expect 0 new-dir lab/ab.sh new-dir "-DMM_X=1 -DMM_Y=2"
[ "$(cat /tmp/test_ab.$$.out)" = "build/ab-new-$(printf '%s' "-DMM_X=1 -DMM_Y=2" | md5sum | cut -c1-8)" ] ||
    { fail=$((fail + 1)); echo "FAIL new-dir: $(cat /tmp/test_ab.$$.out)"; }
expect 2 new-dir-no-flags lab/ab.sh new-dir
expect 0 dry-run-gemm lab/ab.sh run build/ab-test --gemm 12288,49152 --configs deepseek-v4-pro --rounds 3 --iters 10 --dry-run
[ "$(cut -d: -f1 /tmp/test_ab.$$.out | tr '\n' ' ')" = "old new new old old new " ] &&
    [ "$(grep -c ' gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 12288,49152 --tile auto --spread uniform --iters 10 ' /tmp/test_ab.$$.out)" = 6 ] ||
    { fail=$((fail + 1)); echo "FAIL dry-run-gemm: order or commands wrong"; cat /tmp/test_ab.$$.out; }
expect 0 dry-run-gemm-skewed lab/ab.sh run build/ab-test --gemm 49152 --tile 192 --spread skewed --configs deepseek-v4-flash --rounds 1 --dry-run
[ "$(grep -c ' --rows 49152 --tile 192 --spread skewed ' /tmp/test_ab.$$.out)" = 2 ] ||
    { fail=$((fail + 1)); echo "FAIL dry-run-gemm-skewed: --spread not passed on"; cat /tmp/test_ab.$$.out; }
expect 0 dry-run-gemm-extra lab/ab.sh run build/ab-test --gemm 64 --gemm-extra "--weights fp4" --configs deepseek-v4-flash --rounds 1 --dry-run
[ "$(grep -c ' --rows 64 .* --iters 30 --weights fp4 --json ' /tmp/test_ab.$$.out)" = 2 ] ||
    { fail=$((fail + 1)); echo "FAIL dry-run-gemm-extra: flags not passed on"; cat /tmp/test_ab.$$.out; }
expect 0 dry-run-bench lab/ab.sh run build/ab-test --configs deepseek-v4-flash --rounds 2 --dry-run
[ "$(grep -c ' bench --config configs/deepseek-v4-flash.json --modes fused ' /tmp/test_ab.$$.out)" = 4 ] ||
    { fail=$((fail + 1)); echo "FAIL dry-run-bench: commands wrong"; cat /tmp/test_ab.$$.out; }
expect 0 dry-run-bench-extra lab/ab.sh run build/ab-test --configs deepseek-v4-flash --rounds 1 --bench-extra "--ep-slice 8" --dry-run
[ "$(grep -c ' --breakdown --ep-slice 8 --json ' /tmp/test_ab.$$.out)" = 2 ] ||
    { fail=$((fail + 1)); echo "FAIL dry-run-bench-extra: flags not passed on"; cat /tmp/test_ab.$$.out; }
if git rev-parse --git-dir >/dev/null 2>&1; then
    expect 0 prepare-head lab/ab.sh prepare HEAD
    [ "$(cat build/ab-old/REV)" = "$(git rev-parse --short HEAD)" ] && [ -f build/ab-old/Makefile ] &&
        [ -f build/ab-old/kernels/fused.cu ] || { fail=$((fail + 1)); echo "FAIL prepare-head: tree or REV wrong"; }
    rm -rf build/ab-old
fi
rm -f /tmp/test_ab.$$.out
echo "test_ab.sh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
