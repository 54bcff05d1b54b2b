#!/usr/bin/env python3
"""Writes the gate's fixture pairs (committed; rerun only to change them). Deterministic."""
import copy, json, random

FLOORS = {1: 38.3, 64: 786.0, 4096: 934.0}


def run(scale=1.0, spread=0.01, seed=1, gpu="NVIDIA H200", schema="megamoe.results/1"):
    rnd = random.Random(seed)
    rows = []
    for mode, base in (("fused", 100.0), ("normal", 300.0)):
        for batch, mult in ((1, 1.0), (64, 2.0), (4096, 10.0)):
            med = base * mult * scale
            it = [med * (1 + rnd.uniform(-spread, spread)) for _ in range(30)]
            s = sorted(it)
            mean = sum(it) / len(it)
            sd = (sum((x - mean) ** 2 for x in it) / (len(it) - 1)) ** 0.5
            rows.append({"mode": mode, "batch": batch, "status": "OK", "note": "",
                         "time": {"n": 30, "median_us": (s[14] + s[15]) / 2, "mean_us": mean,
                                  "min_us": s[0], "max_us": s[-1], "p90_us": s[26], "stdev_us": sd},
                         "ranks_timed": 2, "rank_median_us": [med, med], "iter_us": it,
                         "diff": None, "work": {"floor_us": FLOORS[batch]}})
    rows.append({"mode": "ll", "batch": 4096, "status": "SKIP", "note": "above the ll cap",
                 "time": None, "ranks_timed": 0, "rank_median_us": [], "iter_us": [], "diff": None,
                 "work": {}})
    return {"schema": schema, "meta": {"config": "deepseek-v4-flash", "ep": 2, "gpu": gpu,
            "git_rev": "fixture", "date": "2026-11-30T00:00:00Z"}, "results": rows}

def write(name, doc):
    with open(name, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")

base = run()
write("base.json", base)
write("identical.json", copy.deepcopy(base))
write("slower10.json", run(scale=1.10, seed=2))
write("faster10.json", run(scale=0.90, seed=3))
write("noisy-a.json", run(spread=0.25, seed=4))
write("noisy-b.json", run(scale=1.03, spread=0.25, seed=5))
failing = run(seed=6)
failing["results"][1]["status"] = "FAIL"
failing["results"][1]["note"] = "calc_diff 3.1e-02 > 1e-04"
write("failing.json", failing)
missing = run(seed=7)
del missing["results"][2]
write("missing.json", missing)
write("other-gpu.json", run(gpu="NVIDIA H100 80GB HBM3", seed=8))
write("other-schema.json", run(schema="megamoe.results/0", seed=9))
interleaved = copy.deepcopy(base)
interleaved["meta"]["interleave"] = True
write("interleaved.json", interleaved)
idled = copy.deepcopy(base)
idled["meta"]["idle_ms"] = 10
write("idled.json", idled)


def rounds(scale=1.0, fused_scale=1.0, seed=10, interleave=True):
    """Modes timed side by side: round i of every mode ran in the same machine state (a shared
    per-round factor), and a whole run may sit a few percent off another (`scale`)."""
    rnd = random.Random(seed)
    doc = run(seed=seed)
    doc["meta"]["interleave"] = interleave
    factors = [scale * (1 + rnd.uniform(-0.01, 0.01)) for _ in range(30)]
    for r in doc["results"]:
        if r["status"] != "OK":
            continue
        base = (100.0 if r["mode"] == "fused" else 300.0) * {1: 1.0, 64: 2.0, 4096: 10.0}[r["batch"]]
        if r["mode"] == "fused":
            base *= fused_scale
        it = [base * f * (1 + rnd.uniform(-0.002, 0.002)) for f in factors]
        s = sorted(it)
        mean = sum(it) / len(it)
        r["iter_us"] = it
        r["time"].update({"median_us": (s[14] + s[15]) / 2, "mean_us": mean, "min_us": s[0], "max_us": s[-1],
                          "p90_us": s[26], "stdev_us": (sum((x - mean) ** 2 for x in it) / (len(it) - 1)) ** 0.5})
        r["rank_median_us"] = [r["time"]["median_us"]] * 2
    return doc


write("rounds-base.json", rounds())
write("rounds-drift4.json", rounds(scale=1.04, seed=11))
write("rounds-fused8.json", rounds(scale=1.04, fused_scale=1.08, seed=12))


def with_stages(doc, gemm1_scale=1.0):
    """fused rows carry `--breakdown` stages (the gate shows them next to a changed row)."""
    for r in doc["results"]:
        if r["mode"] == "fused" and r["status"] == "OK":
            r["stages"] = [{"name": name, "us": us, "by_rank": [us, us]}
                           for name, us in (("dispatch", 40.0), ("gemm1", 600.0 * gemm1_scale), ("gemm2", 300.0))]
    return doc


write("stages-base.json", with_stages(run(seed=13)))
write("stages-slower.json", with_stages(run(scale=1.10, seed=14), gemm1_scale=1.2))


def gemm(scale=1.0, ours_scale=1.0, seed=20):
    """`gemm --json`: ours (gemm1, gemm2) and the cuBLASLt loop beside them (gemm1-cublaslt, ...) at
    4096 and 49152 rows, timed side by side (a shared per-round factor); `scale` moves the whole
    machine, `ours_scale` ours alone."""
    rnd = random.Random(seed)
    factors = [scale * (1 + rnd.uniform(-0.01, 0.01)) for _ in range(30)]
    rows = []
    for g in (1, 2):
        for batch, us in ((4096, 175.0), (49152, 1400.0)):
            for mode, base in ((f"gemm{g}", us / g), (f"gemm{g}-cublaslt", 1.05 * us / g)):
                if mode == f"gemm{g}":
                    base *= ours_scale
                it = [base * f * (1 + rnd.uniform(-0.002, 0.002)) for f in factors]
                s = sorted(it)
                mean = sum(it) / len(it)
                rows.append({"mode": mode, "batch": batch, "status": "OK", "note": "",
                             "time": {"n": 30, "median_us": (s[14] + s[15]) / 2, "mean_us": mean, "min_us": s[0],
                                      "max_us": s[-1], "p90_us": s[26],
                                      "stdev_us": (sum((x - mean) ** 2 for x in it) / (len(it) - 1)) ** 0.5},
                             "iter_us": it, "gemm": {"rows": batch, "n": 4096, "k": 4096 // g, "tile": 128},
                             "diff": {"calc_diff": 1.4e-6}, "work": {}})
    return {"schema": "megamoe.results/1", "meta": {"config": "deepseek-v4-flash", "ep": 8, "gpu": "NVIDIA H200",
            "git_rev": "fixture", "date": "2026-12-01T00:00:00Z", "interleave": True, "tool": "gemm"},
            "results": rows}


write("gemm-base.json", gemm())
write("gemm-drift6.json", gemm(scale=1.06, seed=21))
write("gemm-ours8.json", gemm(ours_scale=1.08, seed=22))
