# Session 35, call 6: the item order's column band on the current code. The twenty-seventh session
# kept bands of 8 (-DMM_GEMM_BAND=8, the default) for the 1-2% it gave Pro GEMM1 at 49152 rows on
# 128 x 128 tiles, while the plain order (band 0) was 0.4-2.3% faster on Flash GEMM2 and 2% on Pro
# on the wide form; since the thirty-third session (narrow2) Pro GEMM1 at 49152 runs the wide form
# too. A/B, band 0 as "new", x 3 rounds alternating, Flash and Pro at 4096 / 12288 / 49152 rows,
# after `check` of every mode on the band-0 build. One H200, carry [".deps"], ~4 min:
#   GIT_REV=<rev> bash results/h200-ep1/experiments/session35/run6.sh
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$SECONDS
scripts/ab.sh run $OUT/ab --gemm 4096,12288,49152 --new-extra "-DMM_GEMM_BAND=0" --rounds 3 --iters 10
echo "ab rc=$? $((SECONDS-t0)) s"
cat $OUT/ab/summary.txt
for f in $OUT/ab/*.json; do
    case $f in *check*) continue ;; esac
    python3 - "$f" <<'PY'
import json, sys, os
d = json.load(open(sys.argv[1]))
out = []
for r in d["results"]:
    if r["mode"].endswith("cublaslt") or not r.get("time"): continue
    out.append("%s/%d %.1f us %.0f MHz" % (r["mode"], r["batch"], r["time"]["median_us"], r["gemm"].get("sm_mhz", 0)))
print("%-34s %s" % (os.path.basename(sys.argv[1]), " | ".join(out)))
PY
done | tee $OUT/band.txt
echo "total $((SECONDS-t0)) s"
