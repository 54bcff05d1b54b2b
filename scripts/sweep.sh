#!/usr/bin/env bash
# The standard sweeps: every config in configs/ (tiny excepted) that fits, every mode, the full
# batch list, on all local GPUs. Writes results/<gpu>-ep<N>/<config>.json plus the text tables.
# usage: scripts/sweep.sh [extra bench flags...]
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
np=${NP:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
[ "$np" -ge 1 ] || { echo "sweep: no GPU found" >&2; exit 2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | tr 'A-Z ' 'a-z-' | sed 's/^nvidia-//; s/-.*//')
dir=results/$gpu-ep$np
mkdir -p "$dir"
worst=0
for cfg in configs/*.json; do
    name=$(basename "$cfg" .json)
    [ "$name" = tiny ] && continue
    echo "sweep: $name on $np GPU(s) -> $dir/$name.json" >&2
    mpirun -np "$np" --bind-to none build/megamoe bench --config "$cfg" --json "$dir/$name.json" \
        --markdown "$dir/$name.md" "$@" >"$dir/$name.txt"
    rc=$?
    # exit 2 here means the config does not fit (or does not divide) at this EP size: not fatal
    [ "$rc" -eq 2 ] && { echo "sweep: $name skipped at EP $np (see above)" >&2; rm -f "$dir/$name.txt"; continue; }
    [ "$rc" -gt "$worst" ] && worst=$rc
done
exit "$worst"
