#!/usr/bin/env bash
# Counts the races a compute-sanitizer racecheck log reports outside the known class of the GEMM
# core (gpu-check): the producer's cp.async writes of a stage's or slot's scales against the math's
# reads of them (ordered by the ring's mbarriers, which racecheck does not model; the ring audit
# checks that order on the hardware), and races inside cuBLASLt's own kernels (nvjet_*). Prints
# the count (0: none other).
set -u
[ $# -eq 1 ] && [ -r "$1" ] || { echo "usage: scripts/racecheck-unknown.sh RACECHECK.log" >&2; exit 2; }
# a report: "Error: Race reported between <access> at <site>" then "and <access> at <site>" lines.
# A report whose sites racecheck left unnamed ("Read access at " with no symbol; seen once, beside
# a cuBLASLt report with the same hazard counts) is cuBLASLt's when a
# named nvjet_ report of the log has the same access kinds and hazard counts; else it counts.
awk '
function site_unnamed(line) { return line ~ /access at *(\[[0-9]+ hazards\])? *$/ }
function signature(r,   i, sig, line, kind, count) {
    sig = ""
    for (i = 1; i <= len[r]; i++) {
        line = site[r, i]
        kind = line ~ /Read access/ ? "R" : "W"
        count = line ~ /\[[0-9]+ hazards\]/ ? line : ""
        sub(/.*\[/, "", count); sub(/ hazards\].*/, "", count)
        sig = sig kind count ";"
    }
    return sig
}
/Race reported between/ { r++; len[r] = 1; site[r, 1] = $0; open_r = 1; next }
open_r && /^=+ +and / { site[r, ++len[r]] = $0; next }
{ open_r = 0 }
END {
    for (q = 1; q <= r; q++) if (site[q, 1] ~ /nvjet_/) lt_sig[signature(q)] = 1
    for (q = 1; q <= r; q++) {
        cp = 0; rd = 0; lt = 0; unnamed = 0
        for (i = 1; i <= len[q]; i++) {
            if (site[q, i] ~ /nvjet_/) lt++
            else if (site[q, i] ~ /Write access at mm_cp_async(4|16)\(/) cp++
            else if (site[q, i] ~ /Read access at (void )?(mm_tile_wait_full|grouped_gemm_wide_kernel(<[^>]*>)?|wide_narrow_consume|wide_wait_block)\(/) rd++
            else if (site_unnamed(site[q, i])) unnamed++
        }
        if (lt == len[q]) continue
        if (cp >= 1 && cp + rd == len[q] && rd >= 1) continue
        if (unnamed == len[q] && (signature(q) in lt_sig)) continue
        bad++
    }
    print bad + 0
}' "$1"
