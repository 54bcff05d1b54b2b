#!/usr/bin/env bash
# Counts the races a compute-sanitizer racecheck log reports outside the known class of the GEMM
# core (gpu-check): the producer's cp.async writes of a stage's or slot's scales against the math's
# reads of them (ordered by the ring's mbarriers, which racecheck does not model; the ring audit
# checks that order on the hardware), and races inside cuBLASLt's own kernels (nvjet_*). Prints
# the count (0: none other).
set -u
[ $# -eq 1 ] && [ -r "$1" ] || { echo "usage: scripts/racecheck-unknown.sh RACECHECK.log" >&2; exit 2; }
# a report: "Error: Race reported between <access> at <site>" then "and <access> at <site>" lines
awk '
/Race reported between/ { if (n) judge(); n = 1; sites[1] = $0; next }
n && /^=+ +and / { sites[++n] = $0; next }
n { judge(); n = 0 }
END { if (n) judge(); print bad + 0 }
function judge(   i, cp, rd, lt) {
    cp = 0; rd = 0; lt = 0
    for (i = 1; i <= n; i++) {
        if (sites[i] ~ /nvjet_/) lt++
        else if (sites[i] ~ /Write access at mm_cp_async(4|16)\(/) cp++
        else if (sites[i] ~ /Read access at (mm_tile_wait_full|grouped_gemm_wide_kernel|wide_narrow_consume|wide_wait_block)\(/) rd++
    }
    if (lt == n) return
    if (cp >= 1 && cp + rd == n && rd >= 1) return
    bad++
}' "$1"
