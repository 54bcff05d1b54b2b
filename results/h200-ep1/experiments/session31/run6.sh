# Thirty-first session, call 6 (one H200, ~3 of the 5 device minutes left): call 4's machine
# streamed decode weights ~10% slower than call 3's (Flash GEMM2 64 rows 90.3 us in-kernel prefix
# / 93.8 prefix kernel, against 83.8 for the prefix kernel on call 3's machine). On whatever
# machine this call gets: the headline gemm files of the final code, then the A/B against the
# prefix kernel (-DGEMM_OWN_PREFIX_MAX=0) at decode, x 2 with the side first alternating.
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
mpi="mpirun --bind-to none -np 1"
mkdir -p /tmp/g
$mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,64,512,4096,12288,49152 --iters 10 --json /tmp/g/gemm-deepseek-v4-flash-ep8.json > /tmp/g/gemm-deepseek-v4-flash-ep8.txt 2>&1; echo "flash rc=$?"
$mpi build/megamoe gemm --config configs/deepseek-v4-pro.json --ep 8 --iters 10 --json /tmp/g/gemm-deepseek-v4-pro-ep8.json > /tmp/g/gemm-deepseek-v4-pro-ep8.txt 2>&1; echo "pro rc=$?"
grep -hE "^gemm[12] " /tmp/g/*.txt | awk '{print $1,$2,$9,$10,$11,$16}'
(cd /tmp && tar czf $OUT/g.tgz g)
echo "headline $((SECONDS-t0)) s"
scripts/ab.sh run /tmp/ab --new-extra -DGEMM_OWN_PREFIX_MAX=0 --gemm 64,512 --tile 128 --configs deepseek-v4-flash,deepseek-v4-pro --rounds 2 --iters 30 --no-check > /tmp/ab.log 2>&1
cp /tmp/ab/ab.tgz $OUT/; grep "^gemm" /tmp/ab.log
echo "total $((SECONDS-t0)) s"
