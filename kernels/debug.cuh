/* The test and diagnostic builds' hooks, in one place. The default build compiles none of them
 * (every hook below is empty or absent without its macro). Each build is a make target that the
 * GPU check runs or a developer builds to look inside a launch:
 *   make inject       -DMM_INJECT_STALL_MS=12000 -DMM_FUSED_INJECT_LATE_MATH_US=2000: item 0's
 *                     producer sleeps past the stage wait (mm_inject_stall, below); fused.cu also
 *                     holds two math warps per CTA before their register increase
 *                     (inject_late_math). gpu-check expects named TIMEOUTs (exit 4), not hangs.
 *   make fault        -DMM_INJECT_FAULT: item 0's producer stores to an unmapped address
 *                     (mm_inject_stall); gpu-check expects exit 3 naming the CUDA error.
 *   make audit        -DMM_RING_AUDIT: the stage ring's protocol checked as it runs (below).
 *   make audit-break  the same with one math warp arriving twice on `empty` (gemm_tile.cuh
 *                     mm_tile_release_branch): the audit must find it.
 *   make steps        -DMM_STEPS: each thread's current wait in host-mapped words (mm_step,
 *                     below); fused.cu's watcher prints them when a launch does not end.
 *   make trace        -DMM_FUSED_TRACE: fused --breakdown also prints the counts hand-off's steps
 *                     and each CTA's first items' times (fused.cu trace_stamp). */
#ifndef MEGAMOE_DEBUG_CUH
#define MEGAMOE_DEBUG_CUH

#include <stdint.h>

/* Diagnostic build (nvcc -DMM_STEPS, `make steps`): before each wait without a clock of its own
 * (barriers, wgmma.wait_group) and each ring wait, a thread writes which one it enters (bit 15
 * set: which one it passed) and the time in ~1 ms units to its host-mapped word, so a launch
 * that never ends shows where every warp stands (fused.cu's watcher prints it). Codes: 0x01nn
 * named barrier nn, 0x02nn barrier-and nn, 0x03ww ring wait ww (mm_pipe_wait; 0x039w: expired),
 * 0x04ss wgmma.wait_group at site ss, 0x10ss the fused kernel's own sites, 0xffff gone. */
#ifdef MM_STEPS
static __device__ volatile uint32_t *mm_steps;
__device__ __forceinline__ void mm_step(uint32_t code)
{
    if (!mm_steps) return;
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    mm_steps[blockIdx.x * blockDim.x + threadIdx.x] = (code & 0xffffu) | ((uint32_t)(now >> 20) << 16);
}
#define MM_STEP(code) mm_step(code)
#else
#define MM_STEP(code) ((void)0)
#endif
#define MM_STEP_PAST(code) MM_STEP((code) | 0x8000u)

/* Diagnostic build (nvcc -DMM_RING_AUDIT, `make audit`): the stage ring's protocol checked as it
 * runs. A math warp counts itself into a stage once it passed the stage's `full`, and out just
 * before it frees it; a producer thread that passed a stage's `empty` must find no math warp in
 * it, or its refill would overwrite what a warp still reads. Each such refill is counted
 * (mm_ring_audit_faults) and the first 8 are printed ("ring audit: ..."; none: the ring held).
 * A check of the barriers' ordering on the hardware itself, where racecheck models it (in a
 * 2-CTA pair, of this CTA's warps; the other CTA's producer checks its own). */
#ifdef MM_RING_AUDIT
#include <stdio.h>
static __shared__ int mm_ring_readers[MM_TILE_STAGES];
__device__ unsigned int mm_ring_audit_faults;
__device__ __forceinline__ void mm_audit_enter(int s)
{
    __syncwarp();
    if (threadIdx.x % 32 == 0) atomicAdd(&mm_ring_readers[s], 1);
    __syncwarp();
}
/* lane 0, after the warp's __syncwarp and before its arrival on `empty` */
__device__ __forceinline__ void mm_audit_leave(int s)
{
    atomicSub(&mm_ring_readers[s], 1);
}
__device__ __forceinline__ void mm_audit_refill(int s)
{
    const int n = *(volatile int *)&mm_ring_readers[s];
    if (n != 0) {
        const unsigned f = atomicAdd(&mm_ring_audit_faults, 1u);
        if (f < 8)
            printf("ring audit: CTA %d producer thread %d refills stage %d while %d math warps read it\n",
                   (int)blockIdx.x, (int)threadIdx.x, s, n);
    }
}
#define MM_AUDIT_ENTER(s) mm_audit_enter(s)
#define MM_AUDIT_REFILL(s) mm_audit_refill(s)
#else
#define MM_AUDIT_ENTER(s) ((void)0)
#define MM_AUDIT_REFILL(s) ((void)0)
#endif

/* Test build (nvcc -DMM_INJECT_STALL_MS=12000, `make inject`): the producer that published item
 * (tile) 0 of the fused kernel or of a grouped GEMM sleeps that long, past the math's 10 s stage
 * wait, so the launch must end with a fused-pipeline / gemm-pipeline TIMEOUT naming that wait,
 * not hang (scripts/gpu-check.sh runs both). */
__device__ __forceinline__ void mm_inject_stall(int item)
{
#ifdef MM_INJECT_STALL_MS
    if (item == 0) {
        uint64_t start, now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
        do {
            __nanosleep(1000000);
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        } while (now - start < MM_INJECT_STALL_MS * 1000000ull);
    }
#elif defined(MM_INJECT_FAULT)
    /* the fault test build (make fault): item 0's producer stores to an unmapped address, so the
     * launch ends in a CUDA error that check and bench must name, then exit 3 without a crash */
    if (item == 0) *(volatile uint32_t *)(uintptr_t)16 = 1u;
#else
    (void)item;
#endif
}

#endif
