#!/bin/bash
# Prepared for the next session (not run in the thirty-eighth: no device time left). Does the
# 2-CTA cluster launch itself cost the wide GEMM part of its ~18% a clock below the probe's step?
# The kernel's skeleton (no loads, stores or scale copies, solo pairs) still launches as clusters;
# the probe never did. The probe's wide step alone, plain and as 2-CTA clusters (each CTA still
# on its own ring), no loads and loads, x 2 rounds alternating. Needs only nvcc (no carry).
#   bash results/h200-ep1/experiments/session38/run7.sh
# Prediction: within 1% (the clusters change only where CTAs are placed); if the clustered step
# drops towards the skeleton's 0.88 a MHz, the launch form is the lead.
set -u
mkdir -p build
nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -o build/rs_tile_probe tests/gpu/rs_tile_probe.cu 2>&1 | grep -v C751 || true
for round in 1 2; do
    if [ $round = 1 ]; then order="0 1"; else order="1 0"; fi
    for c in $order; do
        echo "round $round clusters $c"
        timeout 120 build/rs_tile_probe 40000 4 2 0 $c | grep -E "^wide|rs_tile_probe"
    done
done 2>&1 | tee ${OUT:-/tmp}/run7.txt
