/* What the lab probes (lab/probes/*_probe.cu, standalone programs, not part of the tool) share:
 * a CUDA check that ends main with 1, and an unbounded mbarrier parity wait (a probe that hangs
 * is killed by its caller's time limit). */
#ifndef MEGAMOE_TESTS_GPU_PROBE_CUH
#define MEGAMOE_TESTS_GPU_PROBE_CUH

#include <cuda_runtime.h>
#include <stdio.h>

#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                              \
            return 1;                                                                             \
        }                                                                                         \
    } while (0)

__device__ __forceinline__ void bar_wait(unsigned a, unsigned parity)
{
    unsigned done = 0;
    while (!done)
        asm volatile("{\n.reg .pred q;\nmbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, q;\n}\n"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
}

#endif
