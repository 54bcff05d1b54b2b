#!/usr/bin/env bash
# lab/lab.sh's helpers that need no build: lab_run's status line and result (a match, a
# mismatch, a command past its limit, no input taken from the caller), lab_ok_rows over gemm logs, lab_show's
# line, lab_rounds' order and expectations (against stand-in binaries), lab_ncu's files and lines (against a stand-in for ncu), lab_pack's archive (this script's logs only).
set -u
cd "$(dirname "$0")/../.." || exit 1
tmp=$(mktemp -d)
LAB_LOGS=$tmp/logs LAB_TIMEOUT=1
mkdir -p "$LAB_LOGS" && touch -d '1 hour ago' "$LAB_LOGS/earlier.log" # an earlier script's log
. lab/lab.sh
fail=0
expect() { [ "$1" = "$2" ] || { echo "FAIL: $3: got '$1', want '$2'"; fail=1; }; }
line=$(lab_run 0 ok true); rc=$?
expect "$rc" 0 "lab_run of a passing command"
expect "$(echo "$line" | awk '{print $1, $2, $4}')" "ok rc=0 0" "lab_run's line"
lab_run 0 three sh -c 'echo out; exit 3' >/dev/null; rc=$?
expect "$rc" 1 "lab_run of a status other than the wanted one"
expect "$(cat "$LAB_LOGS/three.log")" "out" "lab_run's log"
echo "the loop's next line" | { lab_run 0 reads cat >/dev/null; read -r rest; expect "$rest" "the loop's next line" "lab_run leaves its caller's input alone"; }
expect "$(cat "$LAB_LOGS/reads.log")" "" "lab_run's command reads no input"
line=$(lab_run 124 slow sleep 5); rc=$?
expect "$rc" 0 "lab_run of a command past LAB_TIMEOUT, wanted 124"
printf 'gemm1   64 x 4096 x 4096  2.0 128 146.3 14.7 3670.5 1e-06 1e-08 OK 487.3 3.33x 0\ngemm2   64 x 4096 x 2048  2.0 128  93.7 11.5 2865.2 1e-06 1e-08 BAD 387.0 4.13x 0\n# gemm1 a comment\n' >"$LAB_LOGS/rows.log"
expect "$(lab_ok_rows)" "gemm rows OK: 1  not OK: 1" "lab_ok_rows"
printf 'gemm2  49152 x  4096 x  2048   1536.0  192     702.2   1174.3    1528.1   0.00e+00  0.00e+00  OK    1637  866.0  1.23x  0.00e+00\n' >"$LAB_LOGS/ab.log"
expect "$(lab_show ab block flash | tr -s ' ')" "flash block gemm2 49152 702.2 us 1174.3 TF/s 1637 MHz 0.717 TF/s a MHz OK" "lab_show"
# lab_rounds: variants alternately, reversed each round, each log's rows shown; an ablation (a5)
# wants exit 1
mkdir -p "$tmp/bin/pf" "$tmp/bin/a5"
for b in megamoe pf/megamoe a5/megamoe; do
    v=${b%/megamoe}; [ "$v" = megamoe ] && v=main
    rc=0; [ "$v" = a5 ] && rc=1
    printf '#!/bin/sh\necho "%s $*" >> %s/calls\necho "gemm1  12288 x  4096 x  4096    384.0  192     353.6   1166.1    1494.7   0.00e+00  0.00e+00  OK    1600  522.8  1.48x  0.00e+00"\nexit %s\n' \
        "$v" "$tmp" "$rc" >"$tmp/bin/$b"
    chmod +x "$tmp/bin/$b"
done
out=$(LAB_BIN_DIR=$tmp/bin LAB_LAUNCH= lab_rounds 2 "main pf a5" ab gemm --rows 12288)
expect "$(cut -d' ' -f1 "$tmp/calls" | tr '\n' ' ')" "main pf a5 a5 pf main " "lab_rounds' order"
expect "$(sed -n 1p "$tmp/calls")" "main gemm --rows 12288" "lab_rounds' arguments"
expect "$(echo "$out" | grep -c 'want 0')" 4 "lab_rounds wants 0 of main and pf"
expect "$(echo "$out" | grep -c 'a5-r[12] *rc=1 *want 1')" 2 "lab_rounds wants 1 of an ablation"
expect "$(echo "$out" | grep '^r2 *pf' | tr -s ' ')" "r2 pf gemm1 12288 353.6 us 1166.1 TF/s 1600 MHz 0.729 TF/s a MHz OK" "lab_rounds shows each row"
# lab_ncu against a stand-in for Nsight Compute: a report, its pages, and the lines printed
cat >"$tmp/ncu" <<'FAKE'
#!/usr/bin/env bash
out= page=
while [ $# -gt 0 ]; do
    case "$1" in -o) out=$2; shift ;; --page) page=$2; shift ;; esac
    shift
done
[ -n "$out" ] && { [ "${FAKE_NCU_FAIL:-0}" = 1 ] && { echo "==ERROR== no kernel profiled"; exit 9; }; : >"$out.ncu-rep"; exit 0; }
case "$page" in
source) cat lab/tests/sass-sample.csv ;;
raw) echo "  sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active      %      71.72" ;;
*) echo "    Duration    us    1.00" ;;
esac
FAKE
chmod +x "$tmp/ncu"
out=$(NCU=$tmp/ncu TMPDIR=$tmp lab_ncu prof 'some_kernel' all true); rc=$?
expect "$rc" 0 "lab_ncu with a report"
expect "$(echo "$out" | grep 'tensor pipe')" "prof tensor pipe active: 71.72%" "lab_ncu's tensor pipe line"
expect "$(echo "$out" | grep -c '^00020  60.0% ex=')" 1 "lab_ncu's top stall, at cuobjdump's offset"
expect "$(ls "$LAB_LOGS" | grep -c '^prof-\(sass.csv.gz\|stalls.txt\|details.txt\|raw.txt\|run.log\)$')" 5 "lab_ncu's files"
out=$(NCU=$tmp/ncu TMPDIR=$tmp FAKE_NCU_FAIL=1 lab_ncu noreport 'x' none true); rc=$?
expect "$rc" 1 "lab_ncu without a report"
expect "$(echo "$out" | grep -c 'no kernel profiled')" 1 "lab_ncu shows why"
mkdir -p "$tmp/out" && lab_pack "$tmp/out"
expect "$(tar tzf "$tmp/out/logs.tgz" | grep -c 'rows.log')" 1 "lab_pack's archive"
expect "$(tar tzf "$tmp/out/logs.tgz" | grep -c 'earlier.log')" 0 "lab_pack leaves an earlier script's logs out"
rm -rf "$tmp"
[ $fail -eq 0 ] && echo "test_lab.sh: lab_run, lab_ok_rows, lab_show, lab_rounds, lab_ncu and lab_pack as documented"
exit $fail
