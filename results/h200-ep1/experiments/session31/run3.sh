# Thirty-first session, call 3 (one H200): (1) gpu-check GPU_CHECK_TOOLS=0 of a3a77a8 (the
# predicated stage release adopted in the core and fused; its gemm steps write the headline gemm
# files), built with the commit's rev; (2) Flash and Pro 49152 x 2 more; (3) the prefix ablation
# (decode-prefix/run1.sh), last so a time-out cuts only it. Logs outside $OUT, one archive back.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$SECONDS
GIT_REV=$GIT_REV GPU_CHECK_TOOLS=0 bash scripts/gpu-check.sh /tmp/gc > /tmp/gc-summary.txt 2>&1
echo "gpu-check rc=$? $((SECONDS-t0)) s"
cp /tmp/gc/gpu-check-logs.tgz /tmp/gc-summary.txt $OUT/
grep -E "FAIL|PASS|ok |passed|failed" /tmp/gc-summary.txt | tail -40
mpi="mpirun --bind-to none -np 1"
for i in 1 2; do
  $mpi build/megamoe gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 49152 --iters 10 2>&1 | grep -E "^gemm"
  $mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 49152 --iters 10 2>&1 | grep -E "^gemm"
done > $OUT/repeats.txt
awk '{print $1,$2,$9,$10,$16}' $OUT/repeats.txt
echo "repeats done $((SECONDS-t0)) s"
bash results/h200-ep1/experiments/decode-prefix/run1.sh
echo "total $((SECONDS-t0)) s"
