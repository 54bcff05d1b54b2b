# Session 33, call 5: narrow2 against the same tree without it (-DMM_WIDE_NARROW2=0) where many
# experts end in a narrow tile: skewed spreads (~1 / (e + 1) rows an expert) at 12288 and 49152
# rows on the wide form, Flash and Pro, x 2 rounds, sides alternating; then Pro uniform 49152
# again (the first A/B was call 1's machine).
set -u
. scripts/lab.sh
t0=$SECONDS
flags=-DMM_WIDE_NARROW2=0
lab_build $OUT || exit 1
scripts/ab.sh run /tmp/ab-skew --new-extra "$flags" --gemm 12288,49152 --tile 192 --spread skewed --rounds 2 --iters 10 --no-check > /tmp/ab-skew.log 2>&1
grep "^gemm\|^ab:" /tmp/ab-skew.log
scripts/ab.sh run /tmp/ab-uni --new-extra "$flags" --gemm 49152 --tile 192 --configs deepseek-v4-pro --rounds 2 --iters 10 --no-check > /tmp/ab-uni.log 2>&1
grep "^gemm\|^ab:" /tmp/ab-uni.log
mkdir -p /tmp/pack && cp /tmp/ab-skew/ab.tgz /tmp/pack/ab-skew.tgz && cp /tmp/ab-uni/ab.tgz /tmp/pack/ab-uni.tgz &&
    cp /tmp/ab-skew.log /tmp/ab-uni.log /tmp/pack/ && tar czf $OUT/ab.tgz -C /tmp/pack .
echo "total $((SECONDS-t0)) s"
