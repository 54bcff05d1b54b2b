/* What the lab probes (lab/probes/*_probe.cu, standalone programs, not part of the tool) share:
 * a CUDA check that ends main with 1, an unbounded mbarrier parity wait (a probe that hangs is
 * killed by its caller's time limit), the operand bytes' generator, the per-CTA clock and the
 * producer thread that feeds a stage ring. */
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

/* The producer's thread 0 of a probe's stage ring (full[s] and empty[s]: its mbarriers, stages_n
 * stages of stage_bytes): each stage once it is free, only signalled (src NULL) or filled with
 * op_bytes of operands by bulk copies of `chunk` bytes from an L2-resident source, each CTA
 * walking its own slots of it. The first a_bytes land at the stage's start, the rest at w_at (a
 * form whose weights sit apart from its rows); chunk divides both parts. */
__device__ __forceinline__ void probe_produce(uint64_t *full_bars, uint64_t *empty_bars, uint8_t *stages, int stages_n,
                                              int stage_bytes, int op_bytes, int a_bytes, int w_at, int chunk,
                                              int kblocks, const uint8_t *src, unsigned src_bytes)
{
    int stage = 0;
    uint32_t phase = 0;
    const unsigned slots = src_bytes / (unsigned)op_bytes;
    for (int kb = 0; kb < kblocks; kb++) {
        bar_wait((unsigned)__cvta_generic_to_shared(&empty_bars[stage]), phase ^ 1u);
        const unsigned full = (unsigned)__cvta_generic_to_shared(&full_bars[stage]);
        if (!src) {
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(full) : "memory");
        } else {
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full), "r"(op_bytes) : "memory");
            const uint8_t *from = src + (size_t)((blockIdx.x * 131u + (unsigned)kb) % slots) * op_bytes;
            const unsigned to = (unsigned)__cvta_generic_to_shared(stages + stage * stage_bytes);
            for (int off = 0; off < op_bytes; off += chunk)
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                                 to + (off < a_bytes ? off : w_at + off - a_bytes)),
                             "l"(from + off), "r"(chunk), "r"(full)
                             : "memory");
        }
        if (++stage == stages_n) {
            stage = 0;
            phase ^= 1u;
        }
    }
}

#endif
