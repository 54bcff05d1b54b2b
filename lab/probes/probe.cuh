/* What the lab probes (lab/probes/*_probe.cu, standalone programs, not part of the tool) share:
 * a CUDA check that ends main with 1, an unbounded mbarrier parity wait (a probe that hangs is
 * killed by its caller's time limit), the operand bytes' generator and the per-CTA clock. */
#ifndef MEGAMOE_TESTS_GPU_PROBE_CUH
#define MEGAMOE_TESTS_GPU_PROBE_CUH

#include <cuda_runtime.h>
#include <stdint.h>
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

/* A hash of a byte's index, and from it a finite e4m3 value of modest size (exponent field 5..9:
 * no NaN, no overflow in a sum) */
__device__ __forceinline__ uint32_t probe_hash(uint32_t i)
{
    i ^= i >> 16;
    i *= 0x7feb352du;
    i ^= i >> 15;
    return i;
}

__device__ __forceinline__ uint8_t probe_random_e4m3(uint32_t i)
{
    const uint32_t h = probe_hash(i);
    return (uint8_t)((h & 0x87u) | ((5u + (h >> 8) % 5u) << 3));
}

/* One thread a CTA: its SM cycles and nanoseconds from start (end 0) to end (end 1), summed over
 * the CTAs into clk[0] and clk[1]; clk[2 + 2 b], clk[3 + 2 b] hold CTA b's start. */
__device__ __forceinline__ void probe_clock_mark(unsigned long long *clk, int end)
{
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    const unsigned long long cy = clock64();
    if (end) {
        atomicAdd(&clk[0], cy - clk[2 + 2 * blockIdx.x]);
        atomicAdd(&clk[1], ns - clk[3 + 2 * blockIdx.x]);
    } else {
        clk[2 + 2 * blockIdx.x] = cy;
        clk[3 + 2 * blockIdx.x] = ns;
    }
}

#endif
