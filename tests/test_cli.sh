#!/usr/bin/env bash
# Exit codes and messages of the binary itself (no GPU needed): every bad input gets exactly one
# line on stderr and exit 2; plan works with and without mpirun.
set -u
bin=${1:-build/megamoe}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
pass=0 fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# expect RC GREP_PATTERN_ON_STDERR_OR_EMPTY LINES(-1 = any) -- command...
expect() {
    local want=$1 pattern=$2 lines=$3; shift 4
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? n
    n=$(grep -c . "$tmp/err")
    if [ "$rc" -ne "$want" ] || { [ -n "$pattern" ] && ! grep -q -- "$pattern" "$tmp/err"; } ||
       { [ "$lines" -ge 0 ] && [ "$n" -ne "$lines" ]; }; then
        echo "FAIL: $* -> rc=$rc (want $want), $n stderr lines (want $lines), pattern '$pattern'"
        sed 's/^/    /' "$tmp/err" | head -5
        fail=$((fail + 1))
    else
        pass=$((pass + 1))
    fi
}

expect 0 "" 0 -- "$bin" --help
expect 0 "" 0 -- "$bin" bench --help
expect 0 "" 0 -- "$bin" plan --help
expect 2 "no command given" 1 -- "$bin"
expect 2 "unknown command 'frob'" 1 -- "$bin" frob
expect 2 "unknown option '--bogus'" 1 -- "$bin" bench --bogus
expect 2 "bad batch list" 1 -- "$bin" bench --batches 1:8:x1
expect 2 "bad batch list" 1 -- "$bin" plan --batches 8,8
expect 2 "unknown mode 'turbo'" 1 -- "$bin" bench --modes fused,turbo
expect 2 "unknown routing" 1 -- "$bin" bench --routing zigzag
expect 2 "--tol" 1 -- "$bin" check --tol 0.5
expect 2 "cannot read" 1 -- "$bin" plan --config tests/configs/nope.json
expect 2 "has no meta.ceilings" 1 -- "$bin" plan --ceilings configs/tiny.json
expect 2 "plan: --ceilings cannot read" 1 -- "$bin" plan --ceilings tests/configs/nope.json
expect 2 "option --ceilings does not apply" 1 -- "$bin" bench --ceilings results/h100-ep1/deepseek-v4-flash-slice8.json
expect 0 "" 0 -- "$bin" plan --ranks 8 --ceilings results/h100-ep1/deepseek-v4-flash-slice8.json
grep -q "^# ceilings: HBM 3168 GB/s, NVLink 370 GB/s one direction, FP8 GEMM 1385 TFLOP/s" "$tmp/out" ||
    { echo "FAIL: plan --ceilings did not take the file's ceilings"; fail=$((fail + 1)); }
expect 2 "cannot read" 1 -- "$bin" plan --config tests/configs
expect 2 "empty file" 1 -- "$bin" plan --config tests/configs/empty.json
expect 2 "not valid JSON" 1 -- "$bin" plan --config tests/configs/not-json.json
expect 2 "'moe_intermediate_size': missing" 1 -- "$bin" plan --config tests/configs/missing-key.json
expect 2 "'moe_intermediate_size': must be a number" 1 -- "$bin" plan --config tests/configs/ill-typed.json
expect 2 "'hidden_size': must be a positive multiple of 128" 1 -- "$bin" plan --config tests/configs/bad-hidden.json
expect 2 "top-k 6 exceeds" 1 -- "$bin" plan --config tests/configs/bad-topk.json
expect 2 "'bench.routing': unknown routing" 1 -- "$bin" bench --config tests/configs/bad-bench.json
expect 2 "not divisible by 3 ranks" 1 -- "$bin" plan --ranks 3
expect 2 "both required" 1 -- "$bin" gate
expect 0 "" 0 -- "$bin" plan --ranks 8 --batches 1,64,8192
"$bin" plan --ranks 8 --batches 1,64,8192 >"$tmp/plan.txt"
grep -Eq '^ +1 +5\.53 .* 35\.7 +hbm +1\.0 +pass\+handoff$' "$tmp/plan.txt" \
    && grep -Eq '^ +8192 .* 1867\.1 +tc +128\.0 +dual$' "$tmp/plan.txt" \
    && pass=$((pass + 1)) || { echo "FAIL: plan floors"; cat "$tmp/plan.txt"; fail=$((fail + 1)); }
# the default config is found from any directory
abs_bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
(cd / && "$abs_bin" plan --batches 1 >/dev/null 2>&1) \
    && pass=$((pass + 1)) || { echo "FAIL: default config from /"; fail=$((fail + 1)); }
# without a GPU, GPU commands say so in one line naming what is missing (exit 2), never crash and
# never blame the driver's version for a driver that is not there; with one this is skipped
if ! nvidia-smi -L >/dev/null 2>&1; then
    for cmd in bench check selftest gemm; do
        expect 2 "megamoe: error: $cmd: no NVIDIA \(GPU\|driver\) on host .*: it needs one GPU per rank; plan and gate run without one" 1 \
            -- "$bin" $cmd --config configs/tiny.json
    done
fi
# `make run` on a machine whose nvidia-smi lists no GPU: one line, exit 2, nothing built or installed
mkdir -p "$tmp/no-gpu"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n' \
    >"$tmp/no-gpu/nvidia-smi"
chmod +x "$tmp/no-gpu/nvidia-smi"
expect 2 "make run: no NVIDIA GPU found (nvidia-smi lists none)" 1 -- env -u MAKEFLAGS -u MAKELEVEL \
    PATH="$tmp/no-gpu:$PATH" make -s --no-print-directory run
# batch lists: 0 tokens is not a batch (the docs' examples parse), and a huge number is out of range
expect 2 "bad batch list: 0 is out of range \[1, 1048576\] (a batch is tokens per rank: at least 1)" 1 -- "$bin" plan --batches 0:64:+16
expect 2 "bad batch list: 99999999999999999999 is out of range \[1, 1048576\]" 1 -- "$bin" plan --batches 99999999999999999999
expect 2 "bad batch list: '123456789012...' is out of range" 1 -- "$bin" plan --batches 123456789012345678901234567890123
expect 0 "" 0 -- "$bin" plan --batches 16:64:+16,1:8:x2
expect 2 "--max-slowdown: 200 is out of range" 1 -- "$bin" gate --baseline a --current b --max-slowdown 200
# plan says SKIP for the batches bench skips
"$bin" plan --batches 64,4096 --max-tokens-per-rank 1024 >"$tmp/plan-skip.txt"
grep -Eq '^ +4096  SKIP: above the buffers. 1024 tokens per rank \(--max-tokens-per-rank\)$' "$tmp/plan-skip.txt" \
    && [ "$(grep -c '^ *4096 ' "$tmp/plan-skip.txt")" -eq 2 ] && [ "$(grep -c 'SKIP' "$tmp/plan-skip.txt")" -eq 2 ] \
    && grep -Eq '^ +64 +[0-9]' "$tmp/plan-skip.txt" \
    && pass=$((pass + 1)) || { echo "FAIL: plan SKIP rows"; cat "$tmp/plan-skip.txt"; fail=$((fail + 1)); }
# check --markdown is an option of check (the README documents it)
expect 0 "" 0 -- "$bin" check --markdown "$tmp/check.md" --help
# gemm's help speaks of its own rows, not bench's (mode, batch)
"$bin" gemm --help >"$tmp/gemm-help.txt"
grep -q "(mode, batch)" "$tmp/gemm-help.txt" && { echo "FAIL: gemm --help speaks of (mode, batch)"; fail=$((fail + 1)); } \
    || pass=$((pass + 1))
# --ep-slice: one rank of EP N on one GPU; plan's floors have no NVLink term, its buffers hold
# N x batch tokens of E / N experts; it is not a flag for a real EP run
"$bin" plan --ep-slice 8 --batches 64,8192 >"$tmp/slice.txt"
grep -q "^# EP 8 slice (--ep-slice): one rank's work on one GPU, 32 experts and up to 8 x batch tokens" "$tmp/slice.txt" \
    && grep -Eq '^ +64 +32\.00 .* 0\.0 +206\.5 .* 0\.0 +206\.5 +hbm' "$tmp/slice.txt" \
    && grep -Eq '^ +8192 .* 0\.0 +1867\.1 +tc' "$tmp/slice.txt" && grep -Eq '^  fused +65536 ' "$tmp/slice.txt" \
    && pass=$((pass + 1)) || { echo "FAIL: plan --ep-slice"; cat "$tmp/slice.txt"; fail=$((fail + 1)); }
expect 2 "--ep-slice: 1 is out of range \[2, 4096\]" 1 -- "$bin" bench --ep-slice 1
expect 2 "plan: --ep-slice 8 plans one rank of EP 8 on one GPU: drop --ranks" 1 -- "$bin" plan --ep-slice 8 --ranks 2
expect 2 "key 'n_routed_experts': 256 experts are not divisible by 3 ranks" 1 -- "$bin" plan --ep-slice 3
if command -v mpirun >/dev/null; then
    expect 2 "bench: --ep-slice 8 emulates one rank of EP 8 on one GPU: run it without mpirun" -1 \
        -- timeout 120 mpirun -np 2 --oversubscribe "$bin" bench --ep-slice 8 --config configs/tiny.json
fi
# FP4 weights: plan prints both formats' bytes and streams FP4 in its floors
"$bin" plan --weights fp4 --batches 64 >"$tmp/fp4.txt"
grep -q "^# experts' weights per rank: FP8 6.44 GB, FP4 3.42 GB (0.531x); the floors below stream FP4$" "$tmp/fp4.txt" \
    && grep -Eq '^ +64 +199\.89 +384 +2673\.6 ' "$tmp/fp4.txt" \
    && pass=$((pass + 1)) || { echo "FAIL: plan --weights fp4"; cat "$tmp/fp4.txt"; fail=$((fail + 1)); }
expect 2 "--weights: expected fp8 or fp4, got 'fp5'" 1 -- "$bin" plan --weights fp5
expect 2 "gemm: --tile 192: FP4 weights run the 128 x 128 tiles only so far" 1 -- "$bin" gemm --weights fp4 --tile 192
# `make plots` of a results file writes under build/, not beside the file
rm -rf build/plots/base
env -u MAKEFLAGS -u MAKELEVEL make -s --no-print-directory plots RESULTS=tests/gate/base.json >/dev/null 2>&1 \
    && [ -s build/plots/base/latency.png ] && [ ! -e tests/gate/base-plots ] \
    && pass=$((pass + 1)) || { echo "FAIL: make plots wrote elsewhere than build/plots/base"; fail=$((fail + 1)); }
# --version: the revision and the libraries, without a GPU
for v in "--version" "bench --version"; do
    # shellcheck disable=SC2086
    "$bin" $v >"$tmp/version.txt" 2>&1 && grep -Eq '^megamoe [0-9a-f]{7}' "$tmp/version.txt" && grep -q '^CUDA   built ' "$tmp/version.txt" \
        && grep -q '^NCCL   built ' "$tmp/version.txt" && grep -q '^MPI    ' "$tmp/version.txt" \
        && pass=$((pass + 1)) || { echo "FAIL: $v"; cat "$tmp/version.txt"; fail=$((fail + 1)); }
done
# another family's config.json: read, with a note of the key read where two could apply
expect 0 "megamoe: note: config tests/configs/qwen3-moe.json: read 'moe_intermediate_size' (768), not 'intermediate_size' (6144)" 1 \
    -- "$bin" plan --config tests/configs/qwen3-moe.json --batches 1
# gpu-check's switch: a value it does not know is a usage error (exit 2) before any GPU is looked for
expect 2 "GPU_CHECK_TOOLS must be 0, 1 or only, not 'some'" 1 -- env GPU_CHECK_TOOLS=some bash scripts/gpu-check.sh "$tmp/gpu-logs"
# under mpirun, on a machine without GPUs: plan for the world size
if command -v mpirun >/dev/null; then
    expect 0 "" -1 -- timeout 120 mpirun -np 2 --oversubscribe "$bin" plan --batches 1,64
    timeout 120 mpirun -np 2 --oversubscribe "$bin" plan --batches 1,64 >"$tmp/mpi.txt" 2>/dev/null
    grep -q "^# EP 2: 128 experts per rank" "$tmp/mpi.txt" && [ "$(grep -c '^# megamoe plan' "$tmp/mpi.txt")" -eq 1 ] \
        && pass=$((pass + 1)) || { echo "FAIL: mpirun plan output"; cat "$tmp/mpi.txt"; fail=$((fail + 1)); }
    expect 2 "not divisible by 3 ranks" -1 -- timeout 120 mpirun -np 3 --oversubscribe "$bin" plan
fi
echo "test_cli.sh: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
