# Helpers for a one-call experiment script on a GPU machine (kept outside the tree; see lab/README.md), to
# be sourced from the repository root: every such script builds a few flag variants, runs a list
# of checks, each time-limited with its log kept, and counts what passed. Timed comparisons go
# through lab/ab.sh.
#
#   lab_build OUT              build/megamoe (GIT_REV from the environment: the device copy's git
#                              HEAD is stale), its log in OUT/build.log; fails with the log's tail
#   lab_variant NAME "FLAGS"   after build/megamoe is built: build/NAME/megamoe with NVEXTRA=FLAGS,
#                              from a copy of build/'s objects (the kernels rebuilt), in the
#                              background; lab_wait_variants waits and fails on a missing binary
#   lab_run WANT NAME CMD...   CMD with a 150 s limit (LAB_TIMEOUT), output in $LAB_LOGS/NAME.log, no input;
#                              prints one line: the name, its exit status and WANT; returns 0
#                              when they match
#   lab_ok_rows                `gemm` rows OK / not OK over every log so far
#   lab_show NAME SIDE [TAG]   each `gemm` row of NAME's log on one line: tag, side, the GEMM,
#                              rows, us, TFLOP/s, MHz, TFLOP/s a MHz, status (A/B tables)
#   lab_rounds ROUNDS "V1 V2 .." PREFIX ARGS...
#                              an A/B: each variant's megamoe (main: build/megamoe, else
#                              build/V/megamoe) with ARGS under one-rank mpirun, alternately, ROUNDS
#                              times, each round in the reverse order of the one before: lab_run
#                              as PREFIX-V-rR (wanting 0, or 1 for a variant named a<digit>.., the
#                              ablations whose outputs are wrong by design), then lab_show
#   lab_ncu NAME KERNEL CACHE CMD...
#                              Nsight Compute ($NCU, default /usr/local/cuda/bin/ncu) on CMD's first
#                              launch of a kernel whose name matches the regex KERNEL, the caches
#                              flushed before each pass (CACHE all) or not (none): into $LAB_LOGS,
#                              NAME-sass.csv.gz (the SASS source table), NAME-stalls.txt
#                              (lab/ncu-stalls.py: offsets as cuobjdump prints them),
#                              NAME-details.txt and NAME-raw.txt; prints the tensor pipe's active
#                              share and the top stalls; 1 when no report came
#   lab_pack OUT               the logs written since lab.sh was sourced into OUT/logs.tgz (few
#                              files come back from the device; a machine's /tmp may still hold an
#                              earlier script's logs, which stay out)
LAB_LOGS=${LAB_LOGS:-/tmp/lab-logs}
LAB_TIMEOUT=${LAB_TIMEOUT:-150}
mkdir -p "$LAB_LOGS"
touch "$LAB_LOGS/.lab-since" # lab_pack takes the files newer than this
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
lab_cjson=()
[ -f .deps/usr/include/cjson/cJSON.h ] && lab_cjson=(CJSON_HOME="$PWD/.deps/usr")
lab_variants=()

lab_build() { # out folder
    make -j16 "${lab_cjson[@]}" GIT_REV="${GIT_REV:-unknown}" build/megamoe >"$1/build.log" 2>&1 ||
        { tail -20 "$1/build.log"; return 1; }
}

lab_variant() { # name, flags
    local dir=build/$1
    mkdir -p "$dir" && cp -a build/src build/kernels "$dir/" && rm -f "$dir"/kernels/*.o "$dir/megamoe"
    make -j8 "${lab_cjson[@]}" BUILD="$dir" NVEXTRA="$2" "$dir/megamoe" >"$LAB_LOGS/build-$1.log" 2>&1 &
    lab_variants+=("$dir/megamoe")
}

lab_wait_variants() {
    wait
    local bin
    for bin in "${lab_variants[@]}"; do
        [ -x "$bin" ] || { echo "lab: $bin did not build"; tail -20 "$LAB_LOGS"/build-*.log; return 1; }
    done
}

lab_run() { # expected status, name, command...
    local want=$1 name=$2 t=$SECONDS rc
    shift 2
    timeout "$LAB_TIMEOUT" "$@" >"$LAB_LOGS/$name.log" 2>&1 </dev/null # mpirun would read a calling loop's input
    rc=$?
    printf '%-30s rc=%-3d want %d %4ds\n' "$name" "$rc" "$want" $((SECONDS - t))
    [ "$rc" -eq "$want" ]
}

lab_ok_rows() {
    local rows
    rows=$(cat "$LAB_LOGS"/*.log 2>/dev/null | grep -E '^gemm[12] ')
    echo "gemm rows OK: $(printf '%s\n' "$rows" | grep -c ' OK ')  not OK: $(printf '%s\n' "$rows" | grep -E '^gemm' | grep -vc ' OK ')"
}

lab_show() { # log name, side, [tag]
    grep -E '^gemm[12] ' "$LAB_LOGS/$1.log" | awk -v v="$2" -v c="${3:-}" '{printf "%-5s %-5s %s %6s %8s us %7s TF/s %s MHz  %.3f TF/s a MHz %s\n", c, v, $1, $2, $9, $10, $15, ($15 > 0 ? $10 / $15 : 0), $14}'
}

lab_rounds() { # rounds, variants, log prefix, megamoe arguments...
    local rounds=$1 order=$2 prefix=$3 r v bin want
    shift 3
    for ((r = 1; r <= rounds; r++)); do
        for v in $order; do
            bin=${LAB_BIN_DIR:-build}/megamoe
            [ "$v" = main ] || bin=${LAB_BIN_DIR:-build}/$v/megamoe
            want=0
            [[ $v =~ ^a[0-9] ]] && want=1
            lab_run $want "$prefix-$v-r$r" ${LAB_LAUNCH-mpirun --bind-to none -np 1} "$bin" "$@"
            lab_show "$prefix-$v-r$r" "$v" "r$r"
        done
        order=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
    done
}

lab_ncu() { # name, kernel regex, cache control, command...
    local name=$1 kernel=$2 cache=$3 t=$SECONDS rc ncu=${NCU:-/usr/local/cuda/bin/ncu}
    local rep=${TMPDIR:-/tmp}/lab-ncu-$1 # the report stays out of the packed logs (megabytes)
    shift 3
    timeout "$LAB_TIMEOUT" "$ncu" -k "regex:$kernel" -c 1 --cache-control "$cache" --section SpeedOfLight \
        --section ComputeWorkloadAnalysis --section WarpStateStats --section SourceCounters -f -o "$rep" "$@" \
        >"$LAB_LOGS/$name-run.log" 2>&1 </dev/null
    rc=$?
    printf '%-30s rc=%-3d ncu %4ds\n' "$name" "$rc" $((SECONDS - t))
    [ -f "$rep.ncu-rep" ] || { tail -5 "$LAB_LOGS/$name-run.log"; return 1; }
    "$ncu" -i "$rep.ncu-rep" --page source --print-source sass --csv >"$LAB_LOGS/$name-sass.csv" 2>/dev/null
    python3 lab/ncu-stalls.py "$LAB_LOGS/$name-sass.csv" 40 >"$LAB_LOGS/$name-stalls.txt" 2>&1
    gzip -f "$LAB_LOGS/$name-sass.csv"
    "$ncu" -i "$rep.ncu-rep" --page details >"$LAB_LOGS/$name-details.txt" 2>&1
    "$ncu" -i "$rep.ncu-rep" --page raw >"$LAB_LOGS/$name-raw.txt" 2>&1
    echo "$name tensor pipe active: $(awk '$1 == "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" {print $3 "%"}' "$LAB_LOGS/$name-raw.txt")"
    head -8 "$LAB_LOGS/$name-stalls.txt"
}

lab_pack() { # out folder
    find "$LAB_LOGS" -type f -newer "$LAB_LOGS/.lab-since" -printf '%P\0' | tar czf "$1/logs.tgz" -C "$LAB_LOGS" --null -T -
}
