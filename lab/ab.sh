#!/usr/bin/env bash
# A/B of two builds in one call on one machine (docs/performance.md: a speedup is claimed only from
# old and new measured side by side): the working tree ("new") against an earlier revision ("old").
#
#   lab/ab.sh prepare REV            (here, with git) the old tree from `git archive REV` into
#                                        build/ab-old, its revision in build/ab-old/REV; carry
#                                        build/ab-old to the GPU machine
#   lab/ab.sh new-dir FLAGS          prints the folder `run --new-extra FLAGS` builds the new
#                                        side in (a script that builds it first is then reused)
#   lab/ab.sh run LOGDIR [options]   (on the GPU machine) builds both, checks the new build,
#                                        times old / new, then new / old, ... (the side that runs
#                                        first alternates, so neither always meets the GPU state
#                                        the other left) and compares each pair with `megamoe gate`;
#                                        LOGDIR/ab.tgz holds every log (one file)
# run options (defaults in brackets):
#   --configs LIST     config names under configs/ [deepseek-v4-flash,deepseek-v4-pro]
#   --batches LIST     bench --batches [1,64,512,4096,8192]
#   --modes LIST       bench --modes [fused]
#   --gemm ROWS        time the GEMM core instead: `gemm --ep 8 --rows ROWS` on one GPU
#   --tile T           with --gemm: gemm --tile [auto]
#   --spread S         with --gemm: gemm --spread (uniform or skewed) [uniform]
#   --gemm-extra F     with --gemm: more gemm flags for both sides, e.g. "--weights fp4" []
#   --bench-extra F    more bench flags for both sides, e.g. "--ep-slice 8" []
#   --rounds N         old / new pairs per config [2]
#   --iters N          bench's or gemm's --iters [30]
#   --np N             ranks [every local GPU]
#   --new-extra FLAGS  NVEXTRA of the new build (a flag experiment on one tree: old = new without it)
#   --no-check         skip `check` of the new build (with --gemm it checks every mode)
#   --dry-run          print the timed commands in their order and stop (no build, no GPU)
# Exit status: 0 when every step ran (the gate's verdicts are in summary.txt, not judged), 2 bad
# usage, 3 a build failed, 1 the new build's check failed.
set -u
cd "$(dirname "$0")/.." || exit 2
old_dir=build/ab-old
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
cmd=$1; shift
# a build folder per flag set: make does not track NVEXTRA, so runs with other flags in the same
# folder would keep the first run's objects
new_dir_of() { echo "build/ab-new-$(printf '%s' "$1" | md5sum | cut -c1-8)"; }
if [ "$cmd" = new-dir ]; then
    [ $# -eq 1 ] || usage
    new_dir_of "$1"
    exit 0
fi
if [ "$cmd" = prepare ]; then
    [ $# -eq 1 ] || usage
    rev=$(git rev-parse --short "$1") || { echo "ab: no revision $1" >&2; exit 2; }
    rm -rf "$old_dir" && mkdir -p "$old_dir" && git archive "$rev" | tar x -C "$old_dir" || exit 3
    echo "$rev" >"$old_dir/REV"
    echo "ab: $old_dir holds $rev; carry it (and .deps) to the GPU machine"
    exit 0
fi
if [ "$cmd" != run ] || [ $# -lt 1 ]; then usage; fi
logs=$1; shift
configs=deepseek-v4-flash,deepseek-v4-pro batches=1,64,512,4096,8192 modes=fused rounds=2 iters=30
np=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true) new_extra="" bench_extra="" gemm_extra="" check=1 gemm_rows="" tile=auto spread=uniform dry=0
while [ $# -gt 0 ]; do
    case $1 in
        --configs) configs=$2; shift 2 ;;
        --batches) batches=$2; shift 2 ;;
        --modes) modes=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --iters) iters=$2; shift 2 ;;
        --np) np=$2; shift 2 ;;
        --new-extra) new_extra=$2; shift 2 ;;
        --bench-extra) bench_extra=$2; shift 2 ;;
        --gemm-extra) gemm_extra=$2; shift 2 ;;
        --no-check) check=0; shift ;;
        --gemm) gemm_rows=$2; shift 2 ;;
        --tile) tile=$2; shift 2 ;;
        --spread) spread=$2; shift 2 ;;
        --dry-run) dry=1; shift ;;
        *) echo "ab: unknown option $1" >&2; usage ;;
    esac
done
[ -n "$gemm_rows" ] && np=1 # the GEMM core runs on one GPU
[ "${np:-0}" -ge 1 ] || [ $dry -eq 1 ] || { echo "ab: no GPU found" >&2; exit 2; }
# round r's sides in the order they run: old first in odd rounds, new first in even ones
sides_of() { if [ $(($1 % 2)) -eq 1 ]; then echo "old new"; else echo "new old"; fi; }
# the timed command of one side (binary, config, JSON path)
timed() {
    if [ -n "$gemm_rows" ]; then
        echo "$1 gemm --config configs/$2.json --ep 8 --rows $gemm_rows --tile $tile --spread $spread --iters $iters${gemm_extra:+ $gemm_extra} --json $3"
    else
        echo "$1 bench --config configs/$2.json --modes $modes --batches $batches --iters $iters --breakdown${bench_extra:+ $bench_extra} --json $3"
    fi
}
if [ $dry -eq 1 ]; then
    for cfg in ${configs//,/ }; do
        for r in $(seq 1 "$rounds"); do
            for side in $(sides_of "$r"); do echo "$side: $(timed "$side" "$cfg" "$logs/$cfg-$side-$r.json")"; done
        done
    done
    exit 0
fi
mkdir -p "$logs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
cjson=()
[ -f .deps/usr/include/cjson/cJSON.h ] && cjson=(CJSON_HOME="$PWD/.deps/usr")
t0=$SECONDS
note() { echo "$*" | tee -a "$logs/summary.txt"; }
# the archive is written outside the folder it reads (tar fails on a folder that changes under it)
pack() {
    local tmp
    tmp=$(mktemp -d) && tar czf "$tmp/ab.tgz" -C "$logs" --exclude ab.tgz . && mv "$tmp/ab.tgz" "$logs/ab.tgz"
    rm -rf "$tmp"
}
: >"$logs/summary.txt"
flags_build=$(new_dir_of "$new_extra")
# the old side: the prepared tree, or with --new-extra alone the working tree without the flags
if [ -n "$new_extra" ] && [ ! -d "$old_dir" ]; then
    old_bin=build/megamoe
    new_build=$flags_build
    note "ab: old = the working tree, new = the same with NVEXTRA=$new_extra"
    make -j16 "${cjson[@]}" >"$logs/build-old.log" 2>&1 &
    make -j16 "${cjson[@]}" BUILD=$new_build NVEXTRA="$new_extra" $new_build/megamoe >"$logs/build-new.log" 2>&1 &
    new_bin=$new_build/megamoe
else
    [ -f "$old_dir/Makefile" ] || { echo "ab: no $old_dir: run 'lab/ab.sh prepare REV' and carry it" >&2; exit 2; }
    old_rev=$(cat "$old_dir/REV" 2>/dev/null || echo unknown)
    note "ab: old = $old_rev ($old_dir), new = the working tree${new_extra:+ with NVEXTRA=$new_extra}"
    old_bin=$old_dir/build/megamoe
    # its own revision in its JSON (git inside build/ab-old would name the working tree's)
    (cd "$old_dir" && make -j16 "${cjson[@]}" GIT_REV="$old_rev") >"$logs/build-old.log" 2>&1 &
    if [ -n "$new_extra" ]; then
        make -j16 "${cjson[@]}" BUILD=$flags_build NVEXTRA="$new_extra" $flags_build/megamoe >"$logs/build-new.log" 2>&1 &
        new_bin=$flags_build/megamoe
    else
        make -j16 "${cjson[@]}" >"$logs/build-new.log" 2>&1 &
        new_bin=build/megamoe
    fi
fi
fail=0
for job in $(jobs -p); do wait "$job" || fail=3; done
if [ ! -x "$old_bin" ] || [ ! -x "$new_bin" ] || [ $fail -ne 0 ]; then
    note "ab: a build failed (build-old.log, build-new.log)"; pack; exit 3
fi
note "ab: built in $((SECONDS - t0)) s"
mpi=(mpirun --bind-to none -np "$np")
rc=0
if [ $check -eq 1 ]; then
    # with --gemm every mode: ll's and normal's GEMMs are the core's, fused shares its tile code
    check_modes=$modes; [ -n "$gemm_rows" ] && check_modes=fused,normal,ll
    "${mpi[@]}" "$new_bin" check --modes "$check_modes" --json "$logs/check-new.json" >"$logs/check-new.log" 2>&1 || rc=1
    note "check (new): $(grep -h '^check:' "$logs/check-new.log" | tail -1)"
    pack
fi
for cfg in ${configs//,/ }; do
    for r in $(seq 1 "$rounds"); do
        for side in $(sides_of "$r"); do
            bin=$old_bin; [ $side = new ] && bin=$new_bin
            # shellcheck disable=SC2046 # timed's words are the command
            timeout 300 "${mpi[@]}" $(timed "$bin" "$cfg" "$logs/$cfg-$side-$r.json") >"$logs/$cfg-$side-$r.txt" 2>&1
            brc=$?
            if [ -n "$gemm_rows" ]; then # gemm rows: GEMM/rows:us
                note "gemm $cfg $side $r: rc=$brc $(grep -E '^gemm[12] ' "$logs/$cfg-$side-$r.txt" | awk '{printf "%s/%s:%s ", $1, $2, $9}')"
            else # batch:us of the first mode's column per row
                note "bench $cfg $side $r: rc=$brc $(grep -E '^ +[0-9]+ +OK' "$logs/$cfg-$side-$r.txt" | awk '{printf "%s:%s ", $1, $3}')"
            fi
        done
        "$new_bin" gate --baseline "$logs/$cfg-old-$r.json" --current "$logs/$cfg-new-$r.json" \
            >"$logs/gate-$cfg-$r.txt" 2>&1
        grc=$?
        note "gate $cfg round $r (old -> new, not judged): exit $grc"
        pack
    done
done
note "ab: done in $((SECONDS - t0)) s"
pack
exit $rc
