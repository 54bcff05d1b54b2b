# Prepared in the thirtieth session, not yet run: the tile prefix kernel's share of a decode GEMM
# call. -DMM_GEMM_PREFIX_ONCE=1 (timing only: the lab launches the prefix only when its counts
# change, and the GEMM's last CTA resets the claim counter) against the default, x 3 rounds with
# the side that runs first alternating (scripts/ab.sh --gemm). One H200, carry [".deps"]; ~3 min.
# If the prefix costs a few us, the real change is the prefix built inside the GEMM kernel
# (perf-notes, thirtieth session, next step 4).
set -u
scripts/ab.sh run /tmp/ab --new-extra -DMM_GEMM_PREFIX_ONCE=1 --gemm 8,64,512,4096 --tile 128 \
    --configs deepseek-v4-flash,deepseek-v4-pro --rounds 3 --iters 30 --no-check
rc=$?
cp /tmp/ab/ab.tgz /tmp/ab/summary.txt $OUT/ # few files come back from the device: one archive
cat /tmp/ab/summary.txt
exit $rc
