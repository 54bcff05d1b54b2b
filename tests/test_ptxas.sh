#!/usr/bin/env bash
# The GEMM core's performance depends on ptxas keeping the wgmma pipeline asynchronous: a branch,
# trap or loop exit it cannot see through makes it wait after every wgmma (info C7518, measured as
# a 20-35% loss). Compiles the kernels that use wgmma and fails if ptxas reports that. CPU only.
set -u
cd "$(dirname "$0")/.."
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
fail=0
for f in kernels/gemm.cu kernels/fused.cu; do
    out=$("$NVCC" -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -I"${NCCL_HOME:-/usr/include}" \
          -Xptxas -v -c "$f" -o /dev/null 2>&1) || { echo "FAIL: $f does not compile"; echo "$out" | tail -5; fail=1; continue; }
    if echo "$out" | grep -q "C7518\|C7510"; then
        echo "FAIL: $f: ptxas serializes wgmma:"; echo "$out" | grep "C751"; fail=1
    fi
    spills=$(echo "$out" | grep -c "[1-9][0-9]* bytes spill")
    [ "$spills" -eq 0 ] || { echo "FAIL: $f: register spills"; fail=1; }
done
[ $fail -eq 0 ] && echo "ptxas: wgmma asynchronous and no spills in gemm.cu and fused.cu"
exit $fail
