#!/usr/bin/env bash
# Two flag sets of one build side by side in one run on one machine (FP8 experts against FP4 ones
# by default): the ratio a format or option gives, each from one run (docs/performance.md: never
# from two runs). Where lab/ab.sh compares two builds with the same flags, this compares two
# flag sets of the same build, which `megamoe gate` would refuse to match (other experts).
#
#   lab/side.sh LOGDIR [options]   (on the GPU machine, after `make`) runs bench with side A's
#                                  flags and side B's alternately, the side that runs first
#                                  alternating between rounds, then prints per config, mode and
#                                  batch each side's median per round and A / B (lab/side-ratios.py);
#                                  LOGDIR/side.tgz holds every log (one file)
# options (defaults in brackets):
#   --a FLAGS          side A's bench flags ["--weights fp8"]
#   --b FLAGS          side B's bench flags ["--weights fp4"]
#   --names A,B        the sides' names in the files and the table [fp8,fp4]
#   --configs LIST     config names under configs/ [deepseek-v4-flash]
#   --batches LIST     bench --batches [1,8,64,512]
#   --modes LIST       bench --modes [fused]
#   --bench-extra F    more bench flags for both sides, e.g. "--ep-slice 8" []
#   --rounds N         A / B pairs per config [2]
#   --iters N          bench's --iters [30]
#   --np N             ranks [every local GPU]
#   --bin PATH         the megamoe binary [build/megamoe]
#   --dry-run          print the commands in their order and stop (no GPU)
# Exit status: 0 when every run ended with status 0, 1 when one did not (its log says why; the
# table shows what came back), 2 bad usage.
set -u
cd "$(dirname "$0")/.." || exit 2
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
case $1 in -*) usage ;; esac
logs=$1; shift
flags_a="--weights fp8" flags_b="--weights fp4" names=fp8,fp4 configs=deepseek-v4-flash batches=1,8,64,512
modes=fused bench_extra="" rounds=2 iters=30 bin=build/megamoe dry=0
np=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || [ "$1" = --dry-run ] || { echo "side: $1 needs a value" >&2; usage; }
    case $1 in
        --a) flags_a=$2; shift 2 ;;
        --b) flags_b=$2; shift 2 ;;
        --names) names=$2; shift 2 ;;
        --configs) configs=$2; shift 2 ;;
        --batches) batches=$2; shift 2 ;;
        --modes) modes=$2; shift 2 ;;
        --bench-extra) bench_extra=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --iters) iters=$2; shift 2 ;;
        --np) np=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --dry-run) dry=1; shift ;;
        *) echo "side: unknown option $1" >&2; usage ;;
    esac
done
name_a=${names%%,*} name_b=${names#*,}
if [ "$name_a" = "$names" ] || [ -z "$name_a" ] || [ -z "$name_b" ] || [ "$name_a" = "$name_b" ] ||
   ! [[ "$name_a$name_b" =~ ^[A-Za-z0-9_.]+$ ]]; then
    echo "side: --names wants two different names of letters, digits, '_' or '.', comma-separated" >&2; exit 2
fi
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "side: --rounds must be a positive integer" >&2; exit 2; }
[ "${np:-0}" -ge 1 ] || [ $dry -eq 1 ] || { echo "side: no GPU found" >&2; exit 2; }
# round r's sides in the order they run: A first in odd rounds, B first in even ones
sides_of() { if [ $(($1 % 2)) -eq 1 ]; then echo "$name_a $name_b"; else echo "$name_b $name_a"; fi; }
timed() { # config, side, round
    local f=$flags_a
    [ "$2" = "$name_b" ] && f=$flags_b
    echo "$bin bench --config configs/$1.json --modes $modes --batches $batches --iters $iters${bench_extra:+ $bench_extra} $f --json $logs/$1-$2-$3.json"
}
if [ $dry -eq 1 ]; then
    for cfg in ${configs//,/ }; do
        for r in $(seq 1 "$rounds"); do
            for side in $(sides_of "$r"); do echo "$side: $(timed "$cfg" "$side" "$r")"; done
        done
    done
    exit 0
fi
[ -x "$bin" ] || { echo "side: no $bin (build it first)" >&2; exit 2; }
mkdir -p "$logs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
rc=0
for cfg in ${configs//,/ }; do
    for r in $(seq 1 "$rounds"); do
        for side in $(sides_of "$r"); do
            # shellcheck disable=SC2046 # timed's words are the command
            timeout 300 mpirun --bind-to none -np "$np" $(timed "$cfg" "$side" "$r") >"$logs/$cfg-$side-$r.txt" 2>&1 || rc=1
        done
    done
done
python3 lab/side-ratios.py "$logs" "$name_a" "$name_b" | tee "$logs/summary.txt"
tmp=$(mktemp -d) && tar czf "$tmp/side.tgz" -C "$logs" --exclude side.tgz . && mv "$tmp/side.tgz" "$logs/side.tgz"
rm -rf "$tmp"
exit $rc
