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
# The patch applies on top of prefix-parallel.patch (it reuses its mm_group_tile_prefix and its
# 128-thread tile_prefix_kernel, still launched for the wide form and past 1024 experts).
# To run: land prefix-parallel first (its run1.sh), then `git apply
# results/h200-ep1/experiments/own-prefix/own-prefix.patch`, commit, and stage the landed
# prefix-parallel revision as the old side: `scripts/ab.sh prepare <that rev>` (build/ab-old).
# Check the SASS first: the producer's gathered-row copies (LDGSTS.E.BYPASS.128) must take
# distinct address registers, as in a3a77a8. Then on one H200 with carry [".deps",
# "build/ab-old"]: `GIT_REV=<rev> bash results/h200-ep1/experiments/own-prefix/run1.sh` (~3 min):
# correctness on both prefix paths, then the A/B at decode (scripts/ab.sh, sides alternating).
# If it wins, gpu-check (GPU_CHECK_TOOLS=0, then only) before landing.
set -u
. scripts/lab.sh
t0=$SECONDS
[ -f build/ab-old/Makefile ] || { echo "build/ab-old not carried (scripts/ab.sh prepare REV)"; exit 1; }
lab_build $OUT || exit 1
lab_variant pfinject -DMM_INJECT_STALL_MS=12000
lab_wait_variants || exit 1
echo "builds $((SECONDS-t0)) s"
mpi="mpirun --bind-to none -np 1" B=build/megamoe
N="--config tests/configs/small-n2048.json --ep 2"
lab_run 0 prefix-1024 $mpi $B gemm --config tests/configs/many-experts.json --ep 1 --rows 1,37,300,2000,9000 --spread skewed --iters 3
lab_run 0 prefix-2048 $mpi $B gemm --config tests/configs/prefix-2048.json --ep 1 --rows 1,37,300,2000,9000 --spread skewed --iters 3
lab_run 0 tiny-skewed $mpi $B gemm --config configs/tiny.json --ep 2 --rows 1,3,37,64,65,129,300,2000 --spread skewed --tile 128 --iters 3
lab_run 0 flash-skewed $mpi $B gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 8,37,512,3000 --spread skewed --tile 128 --iters 3
lab_run 0 memcheck $mpi compute-sanitizer --tool memcheck --error-exitcode 9 --report-api-errors no $B gemm $N --rows 3,37,300,2000 --spread skewed --tile 128 --iters 1 --warmup 0
lab_run 0 racecheck $mpi compute-sanitizer --tool racecheck --report-api-errors no $B gemm --config tests/configs/small-k512.json --ep 2 --rows 1,37,300 --spread skewed --tile 128 --iters 1 --warmup 0
lab_run 4 stall-claims $mpi build/pfinject/megamoe gemm $N --rows 37 --tile 128 --iters 3
lab_run 0 check-np1 $mpi $B check
lab_ok_rows; grep -h "^check:" $LAB_LOGS/check-np1.log
grep -h "ERROR SUMMARY" $LAB_LOGS/memcheck.log; grep -h "RACECHECK SUMMARY" $LAB_LOGS/racecheck.log
echo "racecheck outside the known class: $(scripts/racecheck-unknown.sh $LAB_LOGS/racecheck.log)"
lab_pack $OUT
echo "tests $((SECONDS-t0)) s"
scripts/ab.sh run /tmp/ab --gemm 8,64,512,4096 --tile 128 --configs deepseek-v4-flash,deepseek-v4-pro --rounds 3 --iters 20 --no-check > /tmp/ab.log 2>&1
grep "^gemm\|^ab:" /tmp/ab.log; cp /tmp/ab/ab.tgz $OUT/
echo "total $((SECONDS-t0)) s"
