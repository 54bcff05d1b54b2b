#!/bin/bash
# Session 37, call 3: the probe's quad step (256 x 128, four math warpgroups, 64-column halves
# retired in turn) against the wide step, with and without loads. Logs into $OUT/call3.
set -u
L=$OUT/call3; mkdir -p $L build
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -Xptxas -v -o build/rs_tile_probe tests/gpu/rs_tile_probe.cu > $L/build.txt 2>&1 || { echo build failed; tail -20 $L/build.txt; exit 1; }
grep -i spill $L/build.txt | sort | uniq -c
timeout 100 build/rs_tile_probe 40000 4 1 > $L/probe-4.txt 2>&1; echo "rc $?" >> $L/probe-4.txt
timeout 30 build/rs_tile_probe 4000 4 1 > $L/probe-short.txt 2>&1; echo "rc $?" >> $L/probe-short.txt
cat $L/probe-4.txt $L/probe-short.txt
