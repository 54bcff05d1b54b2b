# Session 33, call 2: what bounds the wide form at 49152 rows (narrow2 code, 476ee99+). One call:
# the SM clock and board power sampled every 100 ms beside six Flash runs (GEMM1's bimodal row:
# does its slow mode come with a lower clock?), and the twenty-sixth session's ablations on
# today's code: loads only (-DMM_WIDE_ABLATE=1: the ring, its barriers and the TMA traffic,
# no MMAs) and nothing stored (=2), Flash and Pro. Timing only: the ablated builds' outputs are wrong.
set -u
. scripts/lab.sh
t0=$SECONDS
lab_build $OUT || exit 1
lab_variant loads "-DMM_WIDE_ABLATE=1"
lab_variant nostore "-DMM_WIDE_ABLATE=2"
lab_wait_variants || exit 1
echo "built $((SECONDS-t0)) s"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 100 > $LAB_LOGS/smi.csv 2>&1 &
smi=$!
mpi="mpirun --bind-to none -np 1"
run() { # name binary config
    echo "$(date +%T.%N) start $1" >> $LAB_LOGS/marks.txt
    lab_run $( [ "$2" = build/megamoe ] && echo 0 || echo 1 ) $1 $mpi $2 gemm --config configs/$3.json --ep 8 --rows 49152 --tile 192 --iters 20
    echo "$(date +%T.%N) end $1" >> $LAB_LOGS/marks.txt
}
for i in 1 2 3; do
    run flash-full-$i build/megamoe deepseek-v4-flash
    run flash-loads-$i build/loads/megamoe deepseek-v4-flash
    run flash-nostore-$i build/nostore/megamoe deepseek-v4-flash
done
run flash-full-4 build/megamoe deepseek-v4-flash
run flash-full-5 build/megamoe deepseek-v4-flash
run pro-full-1 build/megamoe deepseek-v4-pro
run pro-loads-1 build/loads/megamoe deepseek-v4-pro
run pro-nostore-1 build/nostore/megamoe deepseek-v4-pro
kill $smi
for f in $LAB_LOGS/*-[0-9].log; do
    printf '%-22s %s\n' "$(basename $f .log)" "$(grep -E '^gemm[12] ' $f | awk '{printf "%s %s us %s TF/s | ", $1, $9, $10}')"
done
lab_pack $OUT
echo "total $((SECONDS-t0)) s"
