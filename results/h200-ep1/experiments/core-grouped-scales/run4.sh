# ncu of the core's 128 x 128 kernel on Pro GEMM1 49152 rows: grouped scales against per block
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=CJSON_HOME=$PWD/.deps/usr
t0=$SECONDS
make -j16 $C build/megamoe > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
mkdir -p build/ng && cp -a build/src build/kernels build/ng/ && rm -f build/ng/kernels/gemm.o build/ng/megamoe
make $C BUILD=build/ng NVEXTRA=-DMM_GEMM_GROUP_SCALES=0 build/ng/megamoe > $OUT/build-ng.log 2>&1
echo "builds $((SECONDS-t0)) s"
which ncu || ls /usr/local/cuda/bin/ncu
NCU=$(which ncu || echo /usr/local/cuda/bin/ncu)
P="--config configs/deepseek-v4-pro.json --ep 8"
for b in grouped ng; do
  bin=build/megamoe; [ $b = ng ] && bin=build/ng/megamoe
  t=$SECONDS
  timeout 200 $NCU -k regex:grouped_gemm_kernel -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,smsp__average_warp_latency_issue_stalled_barrier,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct \
    $bin gemm $P --rows 49152 --tile 128 --iters 1 --warmup 0 > $OUT/ncu-$b.txt 2>&1
  echo "$b rc=$? $((SECONDS-t)) s"
done
for b in grouped ng; do echo "== $b"; grep -E "Duration|SM Frequency|Throughput|Ipc|bank_conflicts|wavefronts|inst_executed|gmma|sectors|hit_rate|dram__bytes|stalled|Active Warps|Eligible|No Eligible|Issued Warp" $OUT/ncu-$b.txt | head -40; done
