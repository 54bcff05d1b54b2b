# The row-tile prefix built inside the 128 x 128 GEMM kernel (own-prefix.patch: no
# tile_prefix_kernel launch up to 1024 experts, the producer builds it in shared memory, CTA 0
# writes tile_start for the kernels after it, the last CTA zeroes the claim counter), prepared in
# the thirty-first session and NOT yet measured or checked on a GPU in this form. Its first form
# (01bc7db: the build inside the producer's branch) was correct (call 4: ragged rows 102/102,
# check 62/62, memcheck, racecheck, stalls, gpu-check TOOLS=0; call 5: sanitizers and ring audit)
# and 2-3.5 us faster a decode call than the prefix kernel in the same build, but both sides of
# that A/B ran decode 5-15% slower than a3a77a8: inside the branch, ptxas computed each of a
# gathered block's 8 row addresses just before its copy. With the build in front of the branch
# (this patch) the SASS has the addresses up front again.
# The patch now applies on top of prefix-parallel.patch (it reuses its mm_group_tile_prefix and its
# 128-thread tile_prefix_kernel, still launched for the wide form and past 1024 experts).
# To run: land prefix-parallel first (its run1.sh), then `git apply
# results/h200-ep1/experiments/own-prefix/own-prefix.patch`, commit; stage the landed
# prefix-parallel revision's source as the old side and change OLD below to its rev (`mkdir -p
# build/old-$OLD && git archive $OLD Makefile src kernels configs tests scripts | tar -x -C
# build/old-$OLD`); on one H200 with carry [".deps", "build/old-$OLD"]: `GIT_REV=<rev> bash
# results/h200-ep1/experiments/own-prefix/run1.sh` (~2.5 min): the A/B at decode with the order
# alternating, then correctness on both prefix paths. If it wins, gpu-check (GPU_CHECK_TOOLS=0,
# then only) before landing. Check the SASS first: the producer's gathered-row copies
# (LDGSTS.E.BYPASS.128) must take distinct address registers, as in a3a77a8.
set -u
OLD=${OLD:-a3a77a8} # the old side: set to the landed prefix-parallel revision
. scripts/lab.sh
t0=$SECONDS
[ -f build/old-$OLD/Makefile ] || { echo "build/old-$OLD not carried"; exit 1; }
(cd build/old-$OLD && make -j8 CJSON_HOME=$PWD/../../.deps/usr GIT_REV=$OLD build/megamoe > $LAB_LOGS/build-old.log 2>&1) &
lab_build $OUT || exit 1
wait
[ -x build/old-$OLD/build/megamoe ] || { tail -5 $LAB_LOGS/build-old.log; exit 1; }
echo "builds $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1"
for order in "new old" "old new"; do
  for side in $order; do
    b=build/megamoe; [ $side = old ] && b=build/old-$OLD/build/megamoe
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
