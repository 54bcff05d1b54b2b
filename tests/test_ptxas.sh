#!/usr/bin/env bash
# The GEMM core's performance depends on ptxas keeping the wgmma pipeline asynchronous: a branch,
# trap or loop exit it cannot see through makes it wait after every wgmma (info C7518, measured as
# a 20-35% loss). Compiles the kernels that use wgmma and fails if ptxas reports that. CPU only.
set -u
cd "$(dirname "$0")/.."
NVCC=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
fail=0
for build in kernels/gemm.cu kernels/fused.cu; do
    f=${build%% *}
    out=$("$NVCC" -gencode=arch=compute_90a,code=sm_90a -std=c++17 -O3 -Ikernels -I"${NCCL_HOME:-/usr/include}" \
          -Xptxas -v -c $build -o /dev/null 2>&1) || { echo "FAIL: $build does not compile"; echo "$out" | tail -5; fail=1; continue; }
    # C7510/C7518: waits after every wgmma; C7514/C7517: a wait injected where a block sum in
    # flight is read (the consume loop's second block would then not overlap the promotion)
    if echo "$out" | grep -q "C751[0478]"; then
        echo "FAIL: $f: ptxas serializes wgmma:"; echo "$out" | grep "C751"; fail=1
    fi
    # setmaxnreg moves registers within the CTA's pool: the kernel must launch with 168 per
    # thread (384 x 168), or the math warpgroups' increase would wait forever
    if grep -q "mm_regs_math" "$f"; then
        main=$(echo "$out" | grep "Used [0-9]* registers" | grep -o "Used [0-9]*" | sort -k2 -n | tail -1)
        [ "$main" = "Used 168" ] || { echo "FAIL: $f: launch registers '$main', setmaxnreg needs 168"; fail=1; }
    fi
    spills=$(echo "$out" | grep -c "[1-9][0-9]* bytes spill")
    [ "$spills" -eq 0 ] || { echo "FAIL: $f: register spills"; fail=1; }
done
[ $fail -eq 0 ] && echo "ptxas: wgmma asynchronous and no spills in gemm.cu and fused.cu"
exit $fail
