#!/usr/bin/env bash
# lab/ablate.sh without a GPU: --dry-run applies every edit of the dispatch list (each changes
# its file), an edit that matches nothing and a missing list are refused with 2.
set -u
cd "$(dirname "$0")/../.." || exit 1
tmp=$(mktemp -d)
export ABLATE_TREES=$tmp/trees
fail=0
out=$(lab/ablate.sh --dry-run lab/ablations/dispatch.txt "$tmp/logs" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$(echo "$out" | grep -c '^== a-')" -eq 5 ] ||
    { echo "FAIL: ablate.sh --dry-run on dispatch.txt: rc=$rc"; echo "$out" | tail -5; fail=1; }
printf 'a-nothing kernels/fused.cu s/no such text anywhere/x/\n' >"$tmp/bad.txt"
out=$(lab/ablate.sh --dry-run "$tmp/bad.txt" "$tmp/logs" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "the edit changes nothing" ||
    { echo "FAIL: an edit that matches nothing: rc=$rc, '$out'"; fail=1; }
lab/ablate.sh --dry-run "$tmp/none.txt" "$tmp/logs" >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: a missing list: rc=$rc"; fail=1; }
rm -rf "$tmp"
exit $fail
