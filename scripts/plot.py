#!/usr/bin/python3
"""Plots a megamoe results JSON (schema megamoe.results/1) as three PNGs in OUTDIR:
latency vs batch per mode (log-log), speedup of fused vs each baseline, and floor/measured.
Uses Debian's python3-matplotlib (run with /usr/bin/python3).
usage: scripts/plot.py RESULTS.json OUTDIR"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    if doc.get("schema") != "megamoe.results/1":
        sys.exit("plot: %s: not a megamoe.results/1 file" % sys.argv[1])
    meta, rows = doc["meta"], doc["results"]
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    title = "%s, EP %s, %s" % (meta.get("config"), meta.get("ep"), meta.get("gpu"))
    timed = {}
    floors = {}
    routing_floors = {}  # the run's own routing (bench's work.routing_floor_us), when present
    for r in rows:
        if r.get("status") == "OK" and r.get("time"):
            timed.setdefault(r["mode"], {})[r["batch"]] = r["time"]["median_us"]
        work = r.get("work") or {}
        if work.get("floor_us"):
            floors[r["batch"]] = work["floor_us"]
        if work.get("routing_floor_us"):
            routing_floors[r["batch"]] = work["routing_floor_us"]

    def finish(ax, fig, name, ylabel, log_y):
        ax.set_xscale("log", base=2)
        if log_y:
            ax.set_yscale("log")
        ax.set_xlabel("tokens per rank")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
        else:
            ax.text(0.5, 0.5, "no timed rows", ha="center", transform=ax.transAxes)
        fig.savefig(os.path.join(out, name), dpi=110, bbox_inches="tight")
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode in ("fused", "normal", "ll"):
        pts = sorted(timed.get(mode, {}).items())
        if pts:
            ax.plot([b for b, _ in pts], [t for _, t in pts], "o-", label=mode)
    if floors:
        pts = sorted(floors.items())
        ax.plot([b for b, _ in pts], [t for _, t in pts], "k--", label="floor")
    if routing_floors:
        pts = sorted(routing_floors.items())
        ax.plot([b for b, _ in pts], [t for _, t in pts], "k:", label="floor of this routing")
    finish(ax, fig, "latency.png", "latency per layer (us)", True)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    fused = timed.get("fused", {})
    for base in ("normal", "ll"):
        pts = sorted((b, t / fused[b]) for b, t in timed.get(base, {}).items() if b in fused)
        if pts:
            ax.plot([b for b, _ in pts], [s for _, s in pts], "o-", label="fused vs " + base)
    ax.axhline(1.0, color="k", lw=0.8)
    finish(ax, fig, "speedup.png", "speedup (baseline / fused)", False)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode in ("fused", "normal", "ll"):
        pts = sorted((b, floors[b] / t) for b, t in timed.get(mode, {}).items() if b in floors)
        if pts:
            ax.plot([b for b, _ in pts], [r for _, r in pts], "o-", label=mode)
    finish(ax, fig, "floor_ratio.png", "floor / measured", False)
    print("plot: wrote latency.png, speedup.png, floor_ratio.png in %s" % out)


if __name__ == "__main__":
    main()
