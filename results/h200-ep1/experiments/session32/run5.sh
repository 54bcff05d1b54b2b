# Thirty-second session, call 5 (one H200): bench EP1, fused / ll / normal side by side, the
# session's start (974c91f: the one-thread prefix kernel, claims by atomicAdd; build/ab-old)
# against e42cc42 (block-wide prefix kernel, the core's own prefix, the claims of
# gemm_claim_next), sides alternating, Flash and Pro. carry [".deps", "build/ab-old"].
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$SECONDS
scripts/ab.sh run /tmp/ab --configs deepseek-v4-flash,deepseek-v4-pro --batches 1,8,64,512,4096 --modes fused,ll,normal --rounds 2 --iters 20 --no-check > /tmp/ab.log 2>&1
echo "ab rc=$? $((SECONDS-t0)) s"
grep "^ab:\|^gate" /tmp/ab.log
cd /tmp/ab && for f in *-old-*.txt *-new-*.txt; do echo "$f: $(grep -E 'megamoe: (fused|normal|ll) ' $f | awk '{print $2":"$4"="$7}' | tr '\n' ' ')"; done
cp /tmp/ab/ab.tgz $OUT/
