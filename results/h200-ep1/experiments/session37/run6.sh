#!/bin/bash
# Session 37, call 6: does the tensor pipe's work a clock depend on the operand bytes? The probe's
# wide step (no loads 1.07 TFLOP/s a MHz, loads ~1.0) on modest random e4m3 (exponents 5..9),
# on any e4m3 (how quantized data spread), and on zeros. Logs into $OUT/call6.
set -u
L=$OUT/call6; mkdir -p $L build
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -Xptxas -v -o build/rs_tile_probe tests/gpu/rs_tile_probe.cu > $L/build.txt 2>&1 || { echo build failed; tail -20 $L/build.txt; exit 1; }
for fill in 0 1 2 1 0; do
    echo "== fill $fill"; timeout 60 build/rs_tile_probe 40000 4 2 $fill | grep -v "^rs_tile" | tee -a $L/probe-fill$fill.txt
done
for fill in 0 1 2; do
    echo "== short, fill $fill"; timeout 30 build/rs_tile_probe 4000 4 2 $fill | grep -v "^rs_tile" | tee -a $L/probe-short-fill$fill.txt
done
