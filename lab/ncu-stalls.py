#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's source page.

usage: lab/ncu-stalls.py SASS.csv [TOP]

SASS.csv is `ncu -i REPORT --page source --print-source sass --csv` of a report taken with the
SourceCounters section. Prints the total warp-state samples and instructions, the share of each
stall reason, then the TOP (default 40) instructions with the most samples: offset from the
kernel's first instruction (the table's first row; the offset `cuobjdump -sass` prints, so a row
can be read in a local build's SASS of the same code and compiler), share of all samples, times
executed (per warp), the instruction, its 3 largest reasons. A wait loop shows as its branch
(`@P0 BRA`) with long_sb after an mbarrier try_wait."""
import csv
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    rows = list(csv.reader(open(sys.argv[1])))
    # the header is the row that starts with "Address" (the application's own output and ncu's
    # notes may come first when stdout was captured with the CSV)
    start = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if start is None:
        sys.exit("no source table (a row starting with \"Address\") in " + sys.argv[1])
    header, data = rows[start], rows[start + 1:]
    col = {name: i for i, name in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    samples = col["Warp Stall Sampling (All Samples)"]
    executed = col["Instructions Executed"]
    base = int(data[0][0], 16) if data else 0  # the kernel's entry
    total = sum(number(r[samples]) for r in data) or 1.0
    print("total samples", total, "instr executed", sum(number(r[executed]) for r in data))
    share = {h: sum(number(r[col[h]]) for r in data) / total for h in reasons}
    print("by reason:", ", ".join(f"{h[6:]}={100 * v:.1f}" for h, v in sorted(share.items(), key=lambda kv: -kv[1])
                                  if v > 0.005))
    top = int(sys.argv[2]) if len(sys.argv) == 3 else 40
    for r in sorted(data, key=lambda r: -number(r[samples]))[:top]:
        why = sorted(((h[6:], number(r[col[h]])) for h in reasons), key=lambda kv: -kv[1])[:3]
        print(f"{int(r[0], 16) - base:05x} {100 * number(r[samples]) / total:5.1f}% ex={int(number(r[executed])):>10} "
              f"{r[1].strip()[:60]:60s} " + " ".join(f"{k}={100 * v / total:.1f}" for k, v in why if v > 0))


if __name__ == "__main__":
    main()
