#!/usr/bin/env python3
"""The table of lab/side.sh: bench results files LOGDIR/CONFIG-SIDE-ROUND.json of two sides A and B
(megamoe.results/1), per config, mode and batch each side's median per round and A / B: the ratio of
the medians of each round (A's time over B's, so above 1 means B is faster), and its range over the
rounds. A row that did not run OK on a side shows its status instead of a time.

usage: side-ratios.py LOGDIR A B"""
import glob
import json
import os
import re
import sys


def load(logdir, a, b):
    """{(config, mode, batch): {side: {round: median_us or status}}}"""
    rows = {}
    pat = re.compile(r"^(.+)-(%s|%s)-([0-9]+)\.json$" % (re.escape(a), re.escape(b)))
    for path in sorted(glob.glob(os.path.join(logdir, "*.json"))):
        m = pat.match(os.path.basename(path))
        if not m:
            continue
        config, side, rnd = m.group(1), m.group(2), int(m.group(3))
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print("side-ratios: %s: %s" % (path, e), file=sys.stderr)
            continue
        for r in doc.get("results", []):
            key = (config, r.get("mode", "?"), int(r.get("batch", -1)))
            ok = r.get("status") == "OK" and isinstance(r.get("time"), dict)
            val = r["time"]["median_us"] if ok else r.get("status", "?")
            rows.setdefault(key, {}).setdefault(side, {})[rnd] = val
    return rows


def table(rows, a, b):
    out = ["%-24s %-7s %6s  %-22s %-22s %s" % ("config", "mode", "batch", a + " us", b + " us", a + " / " + b)]
    for key in sorted(rows):
        sides = rows[key]
        rounds = sorted(set(sides.get(a, {})) | set(sides.get(b, {})))
        cell = lambda s: ", ".join(
            "%.1f" % v if isinstance(v, float) else str(v) for v in (sides.get(s, {}).get(r, "-") for r in rounds))
        ratios = [sides[a][r] / sides[b][r] for r in rounds
                  if isinstance(sides.get(a, {}).get(r), float) and isinstance(sides.get(b, {}).get(r), float)
                  and sides[b][r] > 0]
        if ratios:
            ratios.sort()
            mid = ratios[len(ratios) // 2] if len(ratios) % 2 else (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
            r = "%.2fx (%.2f-%.2f)" % (mid, ratios[0], ratios[-1]) if len(ratios) > 1 else "%.2fx" % mid
        else:
            r = "-"
        out.append("%-24s %-7s %6d  %-22s %-22s %s" % (key[0], key[1], key[2], cell(a), cell(b), r))
    return out


def main(argv):
    if len(argv) != 4 or argv[2] == argv[3]:
        print(__doc__, file=sys.stderr)
        return 2
    rows = load(argv[1], argv[2], argv[3])
    if not rows:
        print("side-ratios: no results files of %s or %s in %s" % (argv[2], argv[3], argv[1]), file=sys.stderr)
        return 1
    print("\n".join(table(rows, argv[2], argv[3])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
