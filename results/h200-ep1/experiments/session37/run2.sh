#!/bin/bash
# Session 37, call 2: the RS-tile probe's variants: rs256 (A in registers, the warpgroup drains at
# each K block's end), ss256 (the same with A from shared memory), rspipe (A double-buffered: the
# next block's first quarter issued before this block's last is promoted). Logs into $OUT/call2.
set -u
L=$OUT/call2; mkdir -p $L build
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -Xptxas -v -o build/rs_tile_probe tests/gpu/rs_tile_probe.cu > $L/build.txt 2>&1 || { echo build failed; tail -20 $L/build.txt; exit 1; }
grep -i spill $L/build.txt
timeout 150 build/rs_tile_probe 40000 4 > $L/probe-4.txt 2>&1; echo "rc $?" >> $L/probe-4.txt
timeout 60 build/rs_tile_probe 4000 4 > $L/probe-short.txt 2>&1; echo "rc $?" >> $L/probe-short.txt
cat $L/probe-4.txt $L/probe-short.txt
