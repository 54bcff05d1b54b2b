# Thirty-first session, call 7 (one H200, the last ~3 device minutes): calls 4 and 6 ran decode
# 5-15% slower than call 3 on BOTH sides of their A/B; the SASS showed why: with the prefix build
# inside the producer's branch, ptxas computed each of a gathered block's 8 row addresses just
# before its copy. The build moved in front of the branch restores the up-front addresses. Here:
# that build (working tree) against a3a77a8 (prefix kernel; its source carried in
# build/old-a3a77a8) at decode, order alternating, then its correctness on both prefix paths.
set -u
. scripts/lab.sh
t0=$SECONDS
[ -f build/old-a3a77a8/Makefile ] || { echo "build/old-a3a77a8 not carried"; exit 1; }
(cd build/old-a3a77a8 && make -j8 CJSON_HOME=$PWD/../../.deps/usr GIT_REV=a3a77a8 build/megamoe > $LAB_LOGS/build-old.log 2>&1) &
lab_build $OUT || exit 1
wait
[ -x build/old-a3a77a8/build/megamoe ] || { tail -5 $LAB_LOGS/build-old.log; exit 1; }
echo "builds $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
for order in "new old" "old new"; do
  for side in $order; do
    b=build/megamoe; [ $side = old ] && b=build/old-a3a77a8/build/megamoe
    for m in flash pro; do
      echo "$side $m: $($mpi $b gemm --config configs/deepseek-v4-$m.json --ep 8 --rows 64,512 --iters 20 --tile 128 2>&1 | grep -E '^gemm[12] ' | awk '{printf "%s/%s:%s ", $1, $2, $9}')"
    done
  done
done | tee $LAB_LOGS/ab.txt
echo "ab $((SECONDS-t0)) s"
lab_run 0 prefix-1024 $mpi build/megamoe gemm --config tests/configs/many-experts.json --ep 1 --rows 1,37,300,2000,9000 --spread skewed --iters 3
lab_run 0 prefix-2048 $mpi build/megamoe gemm --config tests/configs/prefix-2048.json --ep 1 --rows 1,37,300,2000,9000 --spread skewed --iters 3
lab_run 0 tiny-skewed $mpi build/megamoe gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile 128 --iters 3
lab_run 0 flash-skewed $mpi build/megamoe gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,37,512,3000 --spread skewed --tile 128 --iters 3
lab_run 0 check-np1 $mpi build/megamoe check
lab_ok_rows; grep -h "^check:" $LAB_LOGS/check-np1.log
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
