#!/bin/bash
# Branch exp/compact-decode, first call of the next session (nvidia-h200-x2; carry .deps build/dev
# build/ab-old, where build/ab-old = `git archive main | tar x -C build/ab-old`):
#   1. the racecheck question: `check --modes fused --filter tokens-3` under racecheck on main and
#      on the branch (120 s each): did the branch's run not exit while main's does?
#   2. fused old / new x 2 at decode batches (the refined GEMM2 pairing rule is not measured yet)
#   3. the branch's full scripts/gpu-check.sh (racecheck on smoke, where every tile is compact)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
o=$OUT/r; mkdir -p $o
J="-j8 CJSON_HOME=$PWD/.deps/usr"
make $J GIT_REV=${1:-compact} > $o/build-new.log 2>&1 &
(cd build/ab-old && make $J CJSON_HOME=$PWD/../../.deps/usr GIT_REV=main > $o/build-old.log 2>&1) &
wait
for v in old new; do
  b=build/megamoe; [ $v = old ] && b=build/ab-old/build/megamoe
  timeout 120 mpirun --bind-to none -np 1 compute-sanitizer --tool racecheck --report-api-errors no $b check --modes fused --filter tokens-3 > $o/racecheck-$v.txt 2>&1
  echo "racecheck $v rc=$? $(grep -m1 'RACECHECK SUMMARY' $o/racecheck-$v.txt)"
done
M="timeout 100 mpirun --bind-to none"
for i in 1 2; do for v in old new; do
  b=build/megamoe; [ $v = old ] && b=build/ab-old/build/megamoe
  for m in flash pro; do
    bs=1,2,4,8,16,32,64,512; [ $m = pro ] && bs=1,2,8,64
    $M -np 2 $b bench --config configs/deepseek-v4-$m.json --modes fused --batches $bs --breakdown > $o/$v-$m-$i.txt 2>&1
    echo "$v $m $i rc=$? $(grep -E 'fused +batch +[0-9]+ ' $o/$v-$m-$i.txt | awk '{printf "%s %s %s | ", $4, $5, $7}')"
  done
done; done
GIT_REV=${1:-compact} STEP_TIMEOUT=200 bash scripts/gpu-check.sh $o/g > $o/gpu-check.txt 2>&1; echo "gpu-check rc=$?"
awk '{printf "%s %s | ", $1, $2}' $o/g/summary.txt; echo
cd $OUT && tar czf r.tgz r && rm -rf r
