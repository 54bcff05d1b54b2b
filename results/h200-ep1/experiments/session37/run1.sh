#!/bin/bash
# Session 37, call 1: the RS-tile probe (tests/gpu/rs_tile_probe.cu): the wide form's 192 x 128
# step against a 128 x 256 tile with A in registers, with and without loads, rs256 with 4 and 3
# stages. Logs into $OUT/call1.
set -u
L=$OUT/call1; mkdir -p $L build
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -Xptxas -v -o build/rs_tile_probe tests/gpu/rs_tile_probe.cu > $L/build.txt 2>&1 || { echo build failed; tail -20 $L/build.txt; exit 1; }
grep -i spill $L/build.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv -lms 100 > $L/smi.csv 2>&1 &
SMI=$!
timeout 120 build/rs_tile_probe 40000 4 > $L/probe-4.txt 2>&1; echo "rc $?" >> $L/probe-4.txt
timeout 120 build/rs_tile_probe 40000 3 > $L/probe-3.txt 2>&1; echo "rc $?" >> $L/probe-3.txt
timeout 60 build/rs_tile_probe 4000 4 > $L/probe-short.txt 2>&1; echo "rc $?" >> $L/probe-short.txt
kill $SMI
cat $L/probe-4.txt $L/probe-3.txt $L/probe-short.txt
