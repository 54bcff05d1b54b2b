# 128 x 128 against the wide form in one call (x 3 rounds, alternating), auto's choice on a routing
# spread, and the SM clock / power while each runs alone (is the large-row GEMM at the power cap?)
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
make -j16 CJSON_HOME=$PWD/.deps/usr > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
make -j16 CJSON_HOME=$PWD/.deps/usr BUILD=build/noMMA NVEXTRA=-DMM_WIDE_ABLATE=1 build/noMMA/megamoe > $OUT/build-noMMA.log 2>&1 &
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/wide_tile_probe tests/gpu/wide_tile_probe.cu > $OUT/build-probe.log 2>&1 &
wait
L="mpirun --bind-to none -np 1 build/megamoe gemm"
{
for round in 1 2 3; do
  for t in 128 192; do
    echo "== round $round tile $t flash"; timeout 120 $L --config configs/deepseek-v4-flash.json --ep 8 --rows 4096,12288,24576,49152 --tile $t --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
    echo "== round $round tile $t pro"; timeout 120 $L --config configs/deepseek-v4-pro.json --ep 8 --rows 24576,49152 --tile $t --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
  done
done
for t in auto 128 192; do
  echo "== routing spread (Flash EP2 8192 tokens, 2 ranks' rows on one GPU) tile $t"
  timeout 120 $L --config configs/deepseek-v4-flash.json --ep 2 --rows 49152,98304 --spread routing --tile $t --iters 10 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
done
echo "== auto, uniform (Flash: 192 at 12288-49152; Pro: 128 at 49152, 192 nowhere)"
timeout 120 $L --config configs/deepseek-v4-flash.json --ep 8 --rows 4096,12288,49152 --iters 5 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
timeout 120 $L --config configs/deepseek-v4-pro.json --ep 8 --rows 24576,49152 --iters 5 2>&1 | grep -E "^gemm[12] |rror|TIMEOUT"
} > $OUT/ab.txt 2>&1
# clocks and power, each work alone: the probe (MMAs only), the wide form's loads only, 128 and 192 whole
clk() { # name, command...
  local n=$1; shift
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 20 > $OUT/clk-$n.csv &
  local p=$!
  "$@" > $OUT/run-$n.txt 2>&1
  kill $p; wait $p 2>/dev/null
}
clk probe build/wide_tile_probe 600000
clk noMMA mpirun --bind-to none -np 1 build/noMMA/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 49152 --tile 192 --iters 200 --warmup 20
clk t128 $L --config configs/deepseek-v4-flash.json --ep 8 --rows 49152 --tile 128 --iters 200 --warmup 20
clk t192 $L --config configs/deepseek-v4-flash.json --ep 8 --rows 49152 --tile 192 --iters 200 --warmup 20
for n in probe noMMA t128 t192; do
  echo "== $n"; grep -E "rep|^gemm" $OUT/run-$n.txt
  # the samples at the top quartile of power: the steady state of the long kernels
  python3 - $OUT/clk-$n.csv <<'PY'
import sys, statistics as st
rows=[l.split(', ') for l in open(sys.argv[1]) if l.count(',')>=4]
v=[(float(r[1].split()[0]), float(r[2].split()[0]), r[4].strip()) for r in rows if 'MHz' in r[1] and 'W' in r[2]]
if v:
    p=sorted(x[1] for x in v); cut=p[int(len(p)*0.75)]
    top=[x for x in v if x[1]>=cut]
    print(f"samples {len(v)}; top-quartile power: median SM clock {st.median(x[0] for x in top):.0f} MHz, power {st.median(x[1] for x in top):.0f} W, reasons {sorted(set(x[2] for x in top))}; min clock {min(x[0] for x in v):.0f}")
PY
done >> $OUT/ab.txt
cat $OUT/ab.txt
