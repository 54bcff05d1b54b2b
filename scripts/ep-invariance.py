#!/usr/bin/env python3
"""EP invariance: two `megamoe check --json` files from runs at different EP sizes must give
bit-identical outputs. Rank 0 holds global tokens 0..n-1 at any EP size, and every mode records
a digest of rank 0's output; wherever both runs ran a mode on the same shape, routing and number
of rank-0 tokens, the digests must match. Compared: fused and ll, which compute recipe.md exactly
at any EP size. normal is listed but not compared: above EP1 it sums each rank's experts into one
BF16 partial row before the combine (as DeepEP's normal mode does), one rounding that depends on
how experts are spread over ranks, so its bits change with the EP size by design.

usage: scripts/ep-invariance.py A.json B.json
exit: 0 all comparable digests match, 1 a mismatch, 2 bad input or nothing to compare."""
import json
import sys


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"ep-invariance: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)
    if doc.get("schema") != "megamoe.check/1":
        print(f"ep-invariance: {path} is not a megamoe.check/1 file", file=sys.stderr)
        sys.exit(2)
    return doc


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    a, b = load(argv[1]), load(argv[2])
    ep = lambda d: d.get("meta", {}).get("ep", "?")
    if a.get("meta", {}).get("seed") != b.get("meta", {}).get("seed"):
        print("ep-invariance: the two runs used different seeds (different data)", file=sys.stderr)
        return 2
    rows_b = {s["name"]: s for s in b.get("scenarios", [])}
    compared = mismatched = 0
    print(f"# ep-invariance: {argv[1]} (EP {ep(a)}) vs {argv[2]} (EP {ep(b)})")
    for sa in a.get("scenarios", []):
        sb = rows_b.get(sa["name"])
        # small scenarios scale their expert count with the EP size: a different problem
        if not sb or sa.get("shape") != sb.get("shape") or sa.get("routing") != sb.get("routing"):
            continue
        for mode in ("fused", "normal", "ll"):
            ca, cb = sa.get(mode, {}), sb.get(mode, {})
            da, db = ca.get("rank0_digest"), cb.get("rank0_digest")
            if not da or not db or ca.get("rank0_tokens") != cb.get("rank0_tokens"):
                continue
            if mode == "normal":
                note = "same" if da == db else "differs (per-rank BF16 partial sums: not EP-invariant by design)"
                print(f"{sa['name']:<22} {mode:<7} {ca['rank0_tokens']:>6} tokens  not compared, {note}")
                continue
            compared += 1
            same = da == db
            mismatched += not same
            print(f"{sa['name']:<22} {mode:<7} {ca['rank0_tokens']:>6} tokens  {'same' if same else 'DIFFER'}")
    print(f"ep-invariance: {compared} outputs compared, {mismatched} differ")
    if compared == 0:
        return 2
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
