#!/usr/bin/env bash
# What a GPU CI job calls: a short sweep with fixed settings on all local GPUs, then `gate`
# against the committed baseline results/<gpu>-ep<N>/<config>.json. Exit status: the gate's
# (0 pass, 1 slower or wrong, 2 no baseline or bad input).
# usage: scripts/perf-gate.sh [config] [outdir]     (default deepseek-v4-flash, build/perf-gate)
#        scripts/perf-gate.sh gemm:CONFIG [outdir]   the GEMM core alone on GPU 0: `gemm --ep 8` over the
#            baseline's row counts against results/<gpu>-ep1/gemm-CONFIG-ep8.json (gpu-check writes
#            it), judged against the cuBLASLt loop timed beside each row
# GATE_ARGS adds gate options, e.g. GATE_ARGS="--relative-to normal" to judge fused and ll by their
# time over normal's in the same run (a whole-machine drift cancels; README, Gating CI); for gemm:
# it replaces the default "--relative-to cublaslt".
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
cfg=${1:-deepseek-v4-flash}
out=${2:-build/perf-gate}
mkdir -p "$out"
rows_of() { # the baseline's batches (bench) or row counts (gemm), ascending, comma-separated
    /usr/bin/python3 -c "import json,sys; print(','.join(sorted({str(r['batch']) for r in json.load(open(sys.argv[1]))['results']}, key=int)))" "$1"
}
if [ "${cfg#gemm:}" != "$cfg" ]; then
    cfg=${cfg#gemm:}
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | tr 'A-Z ' 'a-z-' | sed 's/^nvidia-//; s/-.*//')
    baseline=results/$gpu-ep1/gemm-$cfg-ep8.json
    [ -f "$baseline" ] || { echo "perf-gate: no baseline $baseline: commit the one gpu-check writes" >&2; exit 2; }
    make -j all >"$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 3; }
    mpirun -np 1 --bind-to none build/megamoe gemm --config "configs/$cfg.json" --ep 8 --rows "$(rows_of "$baseline")" \
        --warmup 5 --iters 30 --l2-flush on --json "$out/current.json" >"$out/gemm.txt"
    rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || [ "$rc" -eq 4 ] || { cat "$out/gemm.txt"; exit "$rc"; }
    # shellcheck disable=SC2086 # GATE_ARGS is a list of options
    build/megamoe gate --baseline "$baseline" --current "$out/current.json" --markdown "$out/gate.md" \
        ${GATE_ARGS:---relative-to cublaslt}
    exit $?
fi
np=${NP:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | tr 'A-Z ' 'a-z-' | sed 's/^nvidia-//; s/-.*//')
baseline=results/$gpu-ep$np/$cfg.json
[ -f "$baseline" ] || { echo "perf-gate: no baseline $baseline: run scripts/sweep.sh and commit it" >&2; exit 2; }
make -j all >"$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 3; }
# Same batches as the baseline, fixed iteration counts, L2 flushed.
batches=$(rows_of "$baseline")
mpirun -np "$np" --bind-to none build/megamoe bench --config "configs/$cfg.json" --batches "$batches" \
    --warmup 5 --iters 30 --l2-flush on --json "$out/current.json" >"$out/bench.txt"
rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || [ "$rc" -eq 4 ] || { cat "$out/bench.txt"; exit "$rc"; }
# shellcheck disable=SC2086 # GATE_ARGS is a list of options
build/megamoe gate --baseline "$baseline" --current "$out/current.json" --markdown "$out/gate.md" ${GATE_ARGS:-}
