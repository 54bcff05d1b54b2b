#!/usr/bin/env bash
# Ablations of the working tree on one GPU, in one run: each variant is a copy of the sources with
# one sed edit (a stage removed, a constant changed), built from build/'s objects so that only the
# edited file recompiles; bench then runs the tree itself and every variant alternately (the order
# reversed each round) with --breakdown and prints each run's stage lines. A variant whose name
# starts with 'a' computes wrong results by design and runs with --check off; any other is checked.
#
#   lab/ablate.sh [--dry-run] [--rounds N] LIST LOGDIR [bench options...]
#     LIST      lines "name file sed-script" (blank lines and # comments skipped), e.g.
#               lab/ablations/dispatch.txt; the script is one sed expression
#     LOGDIR    build and run logs, one per step (the variants' trees go to $ABLATE_TREES/NAME,
#               default build/ablate)
#     --dry-run apply each edit to its copy and print the diff (no build, no GPU)
#     --rounds  rounds of runs [2]
# Exit status: 0 every step ran, 2 bad usage or an edit that changes nothing, 3 a build failed.
set -u
cd "$(dirname "$0")/.." || exit 2
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
dry=0 rounds=2 trees=${ABLATE_TREES:-build/ablate}
while [ $# -gt 0 ]; do
    case $1 in
        --dry-run) dry=1; shift ;;
        --rounds) rounds=$2; shift 2 ;;
        -*) usage ;;
        *) break ;;
    esac
done
[ $# -ge 2 ] && [ -f "$1" ] || usage
list=$1 logs=$2
shift 2
mkdir -p "$logs" || exit 2
names=() files=()
while read -r name file script; do
    case $name in '' | '#'*) continue ;; esac
    [ -f "$file" ] && [ -n "$script" ] || { echo "ablate: $name: no file '$file' or no edit" >&2; exit 2; }
    d=$trees/$name
    rm -rf "$d" && mkdir -p "$d" && cp -a Makefile src kernels tests configs scripts "$d/" || exit 2
    sed -i -e "$script" "$d/$file" || exit 2
    if cmp -s "$file" "$d/$file"; then echo "ablate: $name: the edit changes nothing in $file" >&2; exit 2; fi
    echo "== $name: $file"
    diff "$file" "$d/$file" | sed 's/^/   /'
    names+=("$name") files+=("$file")
done <"$list"
[ ${#names[@]} -gt 0 ] || { echo "ablate: no variant in $list" >&2; exit 2; }
[ $dry -eq 1 ] && exit 0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
cjson=()
[ -f .deps/usr/include/cjson/cJSON.h ] && cjson=(CJSON_HOME="$PWD/.deps/usr")
make -j16 "${cjson[@]}" build/megamoe >"$logs/build-main.log" 2>&1 || { tail -20 "$logs/build-main.log"; exit 3; }
for i in "${!names[@]}"; do
    name=${names[$i]} d=$trees/${names[$i]}
    # the objects, then the edited file made newer than them: make rebuilds only what depends on it
    mkdir -p "$d/build" && cp -a build/src build/kernels "$d/build/" && touch "$d/${files[$i]}" || exit 3
    make -C "$d" -j4 "${cjson[@]}" build/megamoe >"$logs/build-$name.log" 2>&1 &
done
wait
for name in "${names[@]}"; do
    [ -x "$trees/$name/build/megamoe" ] || { echo "ablate: $name did not build"; tail -20 "$logs/build-$name.log"; exit 3; }
done
order="main ${names[*]}"
for ((r = 1; r <= rounds; r++)); do
    for v in $order; do
        bin=build/megamoe check=on
        [ "$v" = main ] || bin=$trees/$v/build/megamoe
        [[ $v == a* ]] && check=off
        timeout 300 "$bin" bench "$@" --breakdown --check $check >"$logs/$v-r$r.log" 2>&1 </dev/null
        echo "$v r$r (rc $?): $(grep -E '^(fused|normal|ll) +[0-9]' "$logs/$v-r$r.log" | tr -s ' ' | tr '\n' ';')"
    done
    order=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
done
