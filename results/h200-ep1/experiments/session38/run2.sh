#!/bin/bash
# Session 38, call 2: the wide form's deferred stores (-DMM_WIDE_DEFER_STORE: a full tile's half
# is written to its boxes and sent while the next full tile's first K block runs) and the elected
# stage release (-DMM_WIDE_ELECT: the K loop's arrivals predicated, no BSSY/BSYNC), main = both,
# against each alone and neither, x 3 rounds, sides alternating, Flash EP8 12288 / 49152, Pro
# 12288 (main and neither). Correctness of main meanwhile: gpu-check's eleven ragged GEMM steps,
# memcheck and racecheck of the wide form, racecheck of the banded order on 192-row tiles.
# carry [".deps"];  GIT_REV=<rev> bash results/h200-ep1/experiments/session38/run2.sh
set -u
. scripts/lab.sh
L=$OUT/call2; mkdir -p $L
t0=$SECONDS
lab_build $L || exit 1
echo "main built in $((SECONDS-t0)) s"
lab_variant d0e0 "-DMM_WIDE_DEFER_STORE=0 -DMM_WIDE_ELECT=0"
lab_variant d1e0 "-DMM_WIDE_ELECT=0"
lab_variant d0e1 "-DMM_WIDE_DEFER_STORE=0"
mpi="mpirun --bind-to none -np 1"
{
grep -E '^expect_rc 0 gemm-(tiny|k512|h640|prefix|n2048|flash-skewed)' scripts/gpu-check.sh | sed 's/^expect_rc 0 //' |
while read -r name cmd; do
    cmd=${cmd//\$mpi/mpirun --bind-to none}
    lab_run 0 $name bash -c "$cmd" > /dev/null < /dev/null
    echo "$name $(grep -cE '^gemm[12] .* OK ' $LAB_LOGS/$name.log) of $(grep -cE '^gemm[12] ' $LAB_LOGS/$name.log) rows OK"
done
for tool in memcheck racecheck; do
    lab_run 0 san-$tool-wide $mpi compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no build/megamoe gemm \
        --config tests/configs/small-k512.json --ep 2 --rows 1,37,300 --spread skewed --tile 192 --iters 1 --warmup 0
    grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $LAB_LOGS/san-$tool-wide.log
done
lab_run 0 san-racecheck-band-192 $mpi compute-sanitizer --tool racecheck --report-api-errors no build/megamoe gemm \
    --config tests/configs/small-n2048.json --ep 2 --rows 37,300 --spread skewed --tile 192 --iters 1 --warmup 0
echo "band-192: $(grep -h 'RACECHECK SUMMARY' $LAB_LOGS/san-racecheck-band-192.log); outside the known class: $(scripts/racecheck-unknown.sh $LAB_LOGS/san-racecheck-band-192.log)"
lab_ok_rows
} 2>&1 | tee $L/correctness.txt
lab_wait_variants || exit 1
echo "variants built, correctness done at $((SECONDS-t0)) s"
show() { grep -E '^gemm[12] ' $LAB_LOGS/$1.log | awk -v v=$2 '{printf "%-5s %s %6s %8s us %7s TF/s %s MHz  %.3f TF/s a MHz %s\n", v, $1, $2, $9, $10, $15, $10/$15, $14}'; }
for round in 1 2 3; do
    if [ $((round % 2)) = 1 ]; then order="main d0e0 d1e0 d0e1"; else order="d0e1 d1e0 d0e0 main"; fi
    for v in $order; do
        bin=build/megamoe; [ $v = main ] || bin=build/$v/megamoe
        lab_run 0 flash-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-flash.json --ep 8 --rows 12288,49152 --iters 20 --tile 192 > /dev/null
        show flash-$v-r$round $v
        case $v in main|d0e0)
            lab_run 0 pro-$v-r$round $mpi $bin gemm --config configs/deepseek-v4-pro.json --ep 8 --rows 12288 --iters 20 --tile 192 > /dev/null
            show pro-$v-r$round $v;;
        esac
    done
done 2>&1 | tee $L/ab.txt
tar czf $OUT/run2-logs.tgz -C $LAB_LOGS .
echo "total $((SECONDS-t0)) s"
